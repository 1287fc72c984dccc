"""Login follows the team (docs/operations.md, Login and roles): a database whose team table has a member is
never served without a complete [auth]; a secrets file named explicitly must exist and be a file; login settings
under another table's name are refused; an open app (no team, no login) listens on 127.0.0.1 unless an address is
given; and stopping `pxp app` stops every process it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from streamlit.testing.v1 import AppTest

from pxp.app import PAGE
from pxp.app.ui import escape_md
from pxp.team.access import add_member
from pxp.team.config import ConfigError, read_secrets

APP = str(PAGE)  # the page script the server runs for every visit
VIEWS = Path(APP).parent / "views"
LOGIN = ('redirect_uri = "http://localhost:8501/oauth2callback"\ncookie_secret = "' + "x" * 32 + '"\n'
         'client_id = "pxp"\nclient_secret = "s"\nserver_metadata_url = "http://localhost:1/.well-known/openid"\n')


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PXP_DATABASE_URL", "STREAMLIT_"))}
    env["HOME"] = str(home)
    return env


def pxp(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pxp.cli.main", *args], cwd=cwd, env=_env(cwd),
                          capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _team(engine: Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [(str(n), str(r)) for n, r in conn.execute(text("SELECT name, role FROM team_member ORDER BY name"))]


@pytest.fixture(params=["sqlite", "postgresql"])
def team_engine(request: pytest.FixtureRequest) -> Engine:
    """A migrated database whose team has an admin and a researcher."""
    engine: Engine = request.getfixturevalue("engine" if request.param == "sqlite" else "pg_engine")
    add_member(engine, "boss@example.org", "admin")
    add_member(engine, "rita@example.org", "researcher")
    return engine


def test_a_database_with_a_team_is_never_served_without_login(team_engine: Engine, tmp_path: Path) -> None:
    url = team_engine.url.render_as_string(hide_password=False)
    before = _team(team_engine)
    port = _free_port()
    done = pxp(tmp_path, "app", "--port", str(port), "--db", url)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "a team of 2 (1 admin, 1 researcher) but login is off" in lines[0], done.stderr
    assert "configure [auth]" in lines[0] and "Traceback" not in done.stderr
    assert not _listening(port)
    doctor = pxp(tmp_path, "doctor", "--db", url)
    assert doctor.returncode == 1
    assert any(line.startswith("✗ login: ") and "a team of 2" in line for line in doctor.stdout.splitlines())
    assert _team(team_engine) == before


def test_with_login_configured_a_team_database_passes_the_check(team_engine: Engine, tmp_path: Path) -> None:
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text("[auth]\n" + LOGIN)
    url = team_engine.url.render_as_string(hide_password=False)
    doctor = pxp(tmp_path, "doctor", "--db", url)
    assert not any(line.startswith("✗ login: ") and "team" in line for line in doctor.stdout.splitlines())


@pytest.mark.parametrize("page", ["home", "settings", "audit", "datasets", "analytics", "annotate"])
def test_under_streamlit_run_a_team_without_login_serves_only_one_line(
        engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    add_member(engine, "boss@example.org", "admin")
    monkeypatch.setenv("PXP_DATABASE_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / f"{page}.py"))
    at.run()
    assert [e.value for e in at.error] == [escape_md(
        f"{db_url} has a team of 1 (1 admin) but login is off: configure [auth] in the secrets "
        "(docs/operations.md, Login and roles); pxp never serves a team's study without login")]
    assert not at.exception and not at.button and not at.text_input and not at.dataframe


def test_a_member_added_while_the_app_serves_closes_it(engine: Engine, db_url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PXP_DATABASE_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.error
    add_member(engine, "boss@example.org", "admin")
    at.run()
    assert len(at.error) == 1 and "login is off" in at.error[0].value


@pytest.mark.parametrize("named", ["missing.toml", "a-folder"])
def test_a_named_secrets_file_that_is_not_there_stops_the_app(tmp_path: Path, named: str) -> None:
    (tmp_path / "a-folder").mkdir()
    path = tmp_path / named
    with pytest.raises(ConfigError, match=r"the secrets file named by secrets\.files"):
        read_secrets([path], named=True)
    port = _free_port()
    done = pxp(tmp_path, "app", "--port", str(port), "--secrets.files", str(path))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(path) in done.stderr and ("does not exist" if named == "missing.toml" else "not a file") in done.stderr
    assert not _listening(port) and not (tmp_path / "pxp.db").exists()
    # the default places may be absent: nothing was named
    assert not read_secrets([tmp_path / "nowhere.toml"]).login_on


@pytest.mark.parametrize("table", ["oidc", "login", "authentication", "oidc.google", "sso.okta"])
def test_login_settings_under_another_name_are_refused(tmp_path: Path, table: str) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(f"[{table}]\n" + LOGIN)
    with pytest.raises(ConfigError, match=r"did you mean \[auth\]\?"):
        read_secrets([path])
    (tmp_path / ".streamlit").mkdir()
    path.rename(tmp_path / ".streamlit" / "secrets.toml")
    doctor = pxp(tmp_path, "doctor")
    assert doctor.returncode == 1
    assert any(line.startswith("✗ configuration: ") and "did you mean [auth]?" in line
               for line in doctor.stdout.splitlines()), doctor.stdout


def test_top_level_login_keys_are_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(LOGIN)
    with pytest.raises(ConfigError, match=r"must sit in the \[auth\] table.*did you mean \[auth\]\?"):
        read_secrets([path])


def _tree(root: int) -> set[int]:
    """Every process below `root`, from `ps` (independent of pxp's own /proc walk)."""
    rows = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for row in rows.split("\n"):
        if row.strip():
            pid, ppid = map(int, row.split())
            children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out |= set(kids)
        todo += kids
    return out


def _alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            out.add(pid)
    return out


def _wait_for(check: object, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="process trees are read from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopping_pxp_app_stops_the_server_and_every_process_below_it(tmp_path: Path, sig: int) -> None:
    port = _free_port()
    env = _env(tmp_path)
    env["PXP_DATABASE_URL"] = f"sqlite:///{tmp_path / 'open.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "pxp.cli.main", "app", "--port", str(port),
                             "--server.headless", "true"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: _listening(port), 90), "the app did not start"
        for address in _other_addresses():  # an open app listens on the loopback only
            with socket.socket() as s:
                s.settimeout(1)
                assert s.connect_ex((address, port)) != 0
        below = _tree(proc.pid)
        assert below, "pxp app runs the server as its child"
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert _wait_for(lambda: not _listening(port), 10)
        assert _alive(below) == set()
        first = (proc.stderr.readline() if proc.stderr else "").strip()
        assert first.startswith("login is off: serving on 127.0.0.1 only"), first
    finally:
        if proc.poll() is None:
            proc.kill()


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than the loopback."""
    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return [a for a in found if "." in a and not a.startswith("127.")]


SUPERVISED = """
import subprocess, sys, time
grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(grand.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="process trees are read from /proc")
@pytest.mark.parametrize("how", ["SIGTERM", "parent killed"])
def test_a_detached_grandchild_is_stopped_too(tmp_path: Path, how: str) -> None:
    """A run worker starts in its own session; it is still stopped with the server, and when whoever started
    `pxp app` is killed (-9), `pxp app` stops as if told to."""
    server = tmp_path / "server.py"
    server.write_text(SUPERVISED)
    call = (f"import sys, os; from pxp.running.workers.supervise import supervise; "
            f"sys.exit(supervise([sys.executable, {str(server)!r}], dict(os.environ)))")
    if how == "SIGTERM":
        top = subprocess.Popen([sys.executable, "-c", call], stdout=subprocess.PIPE, text=True)
    else:  # a parent that starts the supervisor, then dies by SIGKILL
        wrapper = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {call!r}]); "
                   "print(p.pid, flush=True); time.sleep(600)")
        top = subprocess.Popen([sys.executable, "-c", wrapper], stdout=subprocess.PIPE, text=True)
    try:
        assert top.stdout is not None
        supervisor_pid = top.pid if how == "SIGTERM" else int(top.stdout.readline())
        grandchild = int(top.stdout.readline())
        below = _tree(top.pid)
        assert grandchild in below and _alive({grandchild})
        if how == "SIGTERM":
            top.send_signal(signal.SIGTERM)
            assert top.wait(timeout=30) == 0
        else:
            top.kill()
            top.wait(timeout=10)
            assert _wait_for(lambda: not _alive({supervisor_pid}), 30)
        assert _wait_for(lambda: not _alive(below), 30), _alive(below)
    finally:
        for pid in _alive(_tree(top.pid)):
            os.kill(pid, signal.SIGKILL)
        if top.poll() is None:
            top.kill()
