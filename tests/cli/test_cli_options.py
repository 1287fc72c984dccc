"""The command line's options and database opening.

`--db` before or after any command; `--split all`; a short performance series; read
commands refuse a missing database and open a read-only one; `postgres://` URLs; a run's
whole configuration is checked before anything is stored.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage import store
from pxp.storage.store import get_engine, make_engine
from pxp.storage.tables import Experiment
from tests.cli.test_cli_spine import VECTORS
from tests.factories import make_rad

cli = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def pxp(*args: str) -> Any:
    return cli.invoke(app, list(args), catch_exceptions=False)


def experiments(url: str) -> list[str]:
    with DB(get_engine(url)) as db:
        return list(db.exec(select(Experiment.name)).all())


def transcripts(tmp_path: Path) -> Path:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(VECTORS) + "\n")
    return f


@pytest.fixture
def url(db_url: str) -> str:
    make_rad(get_engine(db_url), per_label=5)
    return db_url


# --- A. --db anywhere, --split all, the short series --------------------------------------------


def test_db_is_accepted_before_and_after_every_command(url: str, tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # a --db that is ignored would make ./pxp.db here
    res = pxp("run", "--dataset", "toy-rad", "--name", "after", "--no-progress", "--db", url)
    assert res.exit_code == 0, res.output
    res = pxp("import", "transcripts", str(transcripts(tmp_path)), "--name", "tx", f"--db={url}")
    assert res.exit_code == 0, res.output
    assert sorted(experiments(url)) == ["after", "tx"]
    before = pxp("--db", url, "report", "--experiment", "after", "--format", "json")
    after = pxp("report", "--experiment", "after", "--format", "json", "--db", url)
    assert before.exit_code == after.exit_code == 0, after.output
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert pxp("validate", "--db", url).exit_code == 0
    assert pxp("calls", "--experiment", "after", "--db", url).exit_code == 0
    assert pxp("export", "--experiment", "tx", "--out", str(tmp_path / "x"), "--db", url).exit_code == 0
    assert (tmp_path / "x" / "messages.jsonl").exists()
    assert not (tmp_path / "cwd" / "pxp.db").exists()
    # the same URL twice is fine, two different ones are refused
    assert pxp("--db", url, "validate", "--db", url).exit_code == 0
    res = pxp("--db", url, "validate", "--db", f"sqlite:///{tmp_path / 'other.db'}")
    assert res.exit_code == 2 and "--db given twice" in res.output


def test_split_all_interacts_on_every_instance(url: str) -> None:
    res = pxp("--db", url, "run", "--dataset", "toy-rad", "--split", "all", "--name", "all", "--no-progress")
    assert res.exit_code == 0, res.output
    with DB(get_engine(url)) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "all")).one()
    assert exp.config["split"] is None
    assert exp.config["resolved"]["interact"]["instances"] == 25
    # without --split the dataset's train split is used, as before
    res = pxp("--db", url, "run", "--dataset", "toy-rad", "--name", "train", "--no-progress")
    with DB(get_engine(url)) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "train")).one()
    assert exp.config["split"] == "train" and exp.config["resolved"]["interact"]["instances"] < 25


def _series_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("After session")) + 1
    rows = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        rows.append(ln.split()[0])
    return rows


def test_run_prints_a_short_performance_series_unless_full(url: str) -> None:
    base = ("--db", url, "run", "--dataset", "toy-rad", "--split", "all", "--no-progress", "--sim-accuracy", "0.3")
    res = pxp(*base, "--name", "short")
    assert res.exit_code == 0, res.output
    rows = _series_rows(res.stdout)
    assert rows[0] == "1" and rows[-1] == "25" and {"10", "20"} <= set(rows)
    assert len(rows) <= 5  # first, last, best, every tenth: not one line per session
    assert "5 of 25 points" in res.stdout or f"{len(rows)} of 25 points" in res.stdout
    full = pxp(*base, "--name", "full", "--full")
    assert _series_rows(full.stdout) == [str(i) for i in range(1, 26)]
    # csv and json carry the whole series (`pxp report --format csv` only with --full: its csv is Table 1)
    csv = pxp(*base, "--name", "csv", "--format", "csv")
    assert res.exit_code == 0, res.output
    assert sum(1 for ln in csv.stdout.splitlines() if ln.startswith("csv,test,")) == 25
    assert "experiment,split,after session (number)" in csv.stdout
    csv = pxp("--db", url, "report", "--experiment", "short", "--format", "csv", "--full")
    assert sum(1 for ln in csv.stdout.splitlines() if ln.startswith("short,test,")) == 25
    js = json.loads(pxp("--db", url, "report", "--experiment", "short", "--format", "json").stdout)
    assert js["performance"]["test"]["after_session"] == list(range(1, 26))
    # `pxp report` summarises the same way, and --full shows every point
    assert _series_rows(pxp("--db", url, "report", "--experiment", "short").stdout) == rows
    assert len(_series_rows(pxp("--db", url, "report", "--experiment", "short", "--full").stdout)) == 25


# --- B. Bad input writes nothing -------------------------------------------------------------------


@pytest.mark.parametrize("cmd", [
    ["report", "--experiment", "a"],
    ["validate"],
    ["calls", "--experiment", "a"],
    ["export", "--experiment", "a", "--out", "OUT"],
    ["run", "--resume", "a"],
    ["run", "--like", "a", "--name", "b"],
])
def test_read_commands_refuse_a_missing_database_and_create_nothing(tmp_path: Path, cmd: list[str]) -> None:
    missing = tmp_path / "no" / "such" / "x.db"
    args = [str(tmp_path / "out") if a == "OUT" else a for a in cmd]
    res = pxp("--db", f"sqlite:///{missing}", *args)
    assert res.exit_code == 1
    assert f"no database at {missing}" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
    assert not (tmp_path / "out").exists()


def test_commands_that_create_data_create_the_database_and_say_so_once(tmp_path: Path) -> None:
    new = tmp_path / "new" / "x.db"
    res = pxp("--db", f"sqlite:///{new}", "import", "transcripts", str(transcripts(tmp_path)), "--name", "t")
    assert res.exit_code == 0, res.output
    assert res.stderr.count(f"created database {new}") == 1 and new.exists()
    res = pxp("--db", f"sqlite:///{new}", "import", "transcripts", str(transcripts(tmp_path)), "--name", "t2")
    assert res.exit_code == 0 and "created database" not in res.stderr


def test_a_failed_first_command_leaves_no_database_behind(tmp_path: Path) -> None:
    new = tmp_path / "new" / "deeper" / "x.db"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    for args in (["import", "transcripts", str(bad), "--name", "t"], ["run", "--dataset", "nope"]):
        res = pxp("--db", f"sqlite:///{new}", *args)
        assert res.exit_code == 1 and "created database" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(("opts", "reason"), [
    (["--machine", "foo:bar"], "machine 'foo:bar' is not available"),
    (["--machine", "anthropic:"], "machine:"),
    (["--checker", "nope"], "checker 'nope' is not available"),
    (["--human", "alice"], "human 'alice' cannot drive a controlled run"),
    (["--sim-accuracy", "1.5"], "--sim-accuracy must be between 0 and 1"),
    (["--sim-accuracy", "-0.1"], "--sim-accuracy must be between 0 and 1"),
    (["--sim-adopt", "2"], "--sim-adopt must be between 0 and 1"),
    (["--sim-mislead", "-1"], "--sim-mislead must be between 0 and 1"),
    (["--sim-latency", "-1"], "--sim-latency must not be negative"),
    (["--n", "10", "--k", "11"], "--k (11) must not be greater than --n (10)"),
    (["--n", "1", "--k", "1"], "--n must be at least 2"),
    (["--split", "nosuch"], "no instances in split 'nosuch'"),
    (["--dataset", "nosuch"], "no dataset named 'nosuch'"),
])
def test_a_bad_run_configuration_is_refused_before_anything_is_stored(
    url: str, opts: list[str], reason: str
) -> None:
    res = pxp("--db", url, "run", "--dataset", "toy-rad", "--no-progress", *opts)
    assert res.exit_code == 1, res.output
    assert reason in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert experiments(url) == []


def test_like_with_an_out_of_range_override_stores_nothing(url: str) -> None:
    assert pxp("--db", url, "run", "--dataset", "toy-rad", "--name", "a", "--no-progress").exit_code == 0
    res = pxp("--db", url, "run", "--like", "a", "--name", "b", "--sim-accuracy", "7")
    assert res.exit_code == 1 and "--sim-accuracy must be between 0 and 1" in res.stderr
    assert experiments(url) == ["a"]


# --- C. Read-only databases, postgres:// URLs --------------------------------------------------------


def _archive(url: str, tmp_path: Path) -> Path:
    """A finished study copied into a folder, then made read-only: chmod 444 file, 555 folder."""
    assert pxp("--db", url, "run", "--dataset", "toy-rad", "--name", "arch", "--no-progress").exit_code == 0
    get_engine(url).dispose()
    folder = tmp_path / "archive"
    folder.mkdir()
    db = folder / "study.db"
    src = sqlite_path(url)
    with DB(get_engine(url)) as s:  # a consistent copy with the WAL folded in
        s.connection().exec_driver_sql(f"VACUUM INTO '{db}'")
    assert src.exists() and db.exists()
    db.chmod(0o444)
    folder.chmod(0o555)
    return db


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def _restore(folder: Path) -> None:
    folder.chmod(0o755)
    for f in folder.iterdir():
        f.chmod(0o644)


def test_a_read_only_file_opens_read_only_by_its_mode_bits(url: str, tmp_path: Path) -> None:
    """Also as root (whom os.access lets write anything): the mode bits decide."""
    db = _archive(url, tmp_path)
    try:
        e = make_engine(f"sqlite:///{db}")
        assert store.is_read_only(e) and "immutable=1" in str(e.url)  # the folder is read-only too
        db.parent.chmod(0o755)
        e2 = make_engine(f"sqlite:///{db}")
        assert store.is_read_only(e2) and "mode=ro" in str(e2.url) and "immutable" not in str(e2.url)
        db.chmod(0o644)
        assert not store.is_read_only(make_engine(f"sqlite:///{db}"))
        for engine in (e, e2):
            engine.dispose()
    finally:
        _restore(db.parent)


def _unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a process that cannot bypass file permissions.

    Root would write a chmod 444 file anyway; the process is run without the capabilities
    that let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), so the file and folder
    really are read-only to it. Other users are bound by the permissions already.
    """
    cmd = [sys.executable, "-m", "pxp.cli.main", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to test read-only storage as root"
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


@pytest.mark.long
def test_read_commands_work_on_a_read_only_archive(url: str, tmp_path: Path) -> None:
    db = _archive(url, tmp_path)
    ro = f"sqlite:///{db}"
    work = tmp_path / "work"
    work.mkdir()
    try:
        # the condition is real: this process cannot create a file in the archive
        probe = _unprivileged(["--db", f"sqlite:///{db.parent / 'new.db'}", "import", "transcripts",
                               str(transcripts(tmp_path)), "--name", "t"], work)
        assert probe.returncode == 1 and "Traceback" not in probe.stderr
        rep = _unprivileged(["--db", ro, "report", "--experiment", "arch", "--format", "json"], work)
        assert rep.returncode == 0, rep.stderr
        assert json.loads(rep.stdout)["total_sessions"] > 0
        val = _unprivileged(["validate", "--db", ro], work)
        assert val.returncode == 0 and "conform" in val.stdout, val.stderr
        calls = _unprivileged(["calls", "--experiment", "arch", "--format", "json", "--db", ro], work)
        assert calls.returncode == 0 and json.loads(calls.stdout)["experiment"] == "arch", calls.stderr
        exp = _unprivileged(["export", "--experiment", "arch", "--out", str(work / "x"), "--db", ro], work)
        assert exp.returncode == 0 and (work / "x" / "sessions.jsonl").exists(), exp.stderr
        # writing is refused in one line; the archive is untouched
        run = _unprivileged(["--db", ro, "run", "--dataset", "toy-rad", "--name", "more", "--no-progress"], work)
        assert run.returncode == 1 and "Traceback" not in run.stderr and "the database is read-only" in run.stderr
        assert sorted(p.name for p in db.parent.iterdir()) == ["study.db"]
    finally:
        _restore(db.parent)


def test_postgres_scheme_urls_work_like_postgresql(pg_url: str, tmp_path: Path) -> None:
    assert pg_url.startswith("postgresql+psycopg://")
    short = "postgres://" + pg_url.removeprefix("postgresql+psycopg://")
    assert store.database_url(short) == pg_url
    assert store.database_url("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    res = pxp("--db", short, "import", "transcripts", str(transcripts(tmp_path)), "--name", "pg")
    assert res.exit_code == 0, res.output
    res = pxp("report", "--experiment", "pg", "--format", "json", "--db", short)
    assert res.exit_code == 0 and json.loads(res.stdout)["experiment"] == "pg"
    get_engine(short).dispose()


# --- what pxp makes is all-or-nothing (docs/operations.md, Databases) -------------------------------------------

def _full_disk() -> None:
    """In the child: files larger than 700 kB cannot be written (a full disk for SQLite and the film files)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (700_000, 700_000))


@pytest.mark.parametrize("films", [False, True], ids=["demo", "demo-films"])
def test_a_demo_that_fails_part_way_leaves_nothing(tmp_path: Path, films: bool) -> None:
    new = tmp_path / "new" / "pxp.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "pxp.cli.main", "--db", f"sqlite:///{new}", "demo", *(["--films"] if films else [])]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, preexec_fn=_full_disk)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.startswith(f"error: {new}: the demo was not made (") and res.stdout == "", res.stderr
    assert res.stderr.rstrip().endswith("; nothing of it was kept") and len(res.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no database, no temporary file, no folder made for it


def test_a_demo_where_no_database_can_be_made_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    where = tmp_path / "a-file" / "pxp.db"
    res = pxp("--db", f"sqlite:///{where}", "demo")
    assert res.exit_code == 1 and "created database" not in res.stderr
    said = f"error: {where}: the database cannot be created ({where.parent} is not a folder); choose another path"
    assert res.stderr.startswith(said), res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_db_init_makes_a_new_file_beside_and_renames_it_into_place(tmp_path: Path) -> None:
    new = tmp_path / "made" / "team.db"
    res = pxp("--db", f"sqlite:///{new}", "db", "init")
    assert res.exit_code == 0, res.output
    assert res.stderr == f"created database {new}\n" and res.stdout == f"pxp's tables are ready in {new}\n"
    assert sorted(p.name for p in new.parent.iterdir()) == ["team.db"]  # the temporary file is gone
    assert store.schema_state(make_engine(f"sqlite:///{new}"))[0] == "pxp"
    res = pxp("--db", f"sqlite:///{new}", "demo")
    assert res.exit_code == 0 and "created database" not in res.stderr, res.output


@pytest.mark.parametrize("body", [b"", b"input,prediction\n"], ids=["0-byte", "header-only"])
def test_a_refused_command_leaves_an_empty_postgresql_database_empty(pg_url: str, tmp_path: Path,
                                                                     body: bytes) -> None:
    from sqlalchemy import inspect

    f = tmp_path / "rows.csv"
    f.write_bytes(body)
    res = pxp("--db", pg_url, "import", "csv", str(f), "--no-progress")
    assert res.exit_code == 1 and "rows.csv" in res.stderr, res.output
    engine = make_engine(pg_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
    res = pxp("--db", pg_url, "demo")  # and pxp makes it whole later
    assert res.exit_code == 0, res.output
    store.forget_engine(pg_url)


_FAULT = {  # a write the database refuses part-way through the demo (as a full disk would), planted in it
    "sqlite": ["CREATE TRIGGER fault BEFORE INSERT ON {table} BEGIN SELECT RAISE(ABORT, 'database or disk is full'); "
               "END"],
    "postgresql": ["CREATE FUNCTION fault() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'could not extend file: "
                   "No space left on device'; END $$ LANGUAGE plpgsql",
                   "CREATE TRIGGER fault BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION fault()"],
}


def _rows(url: str) -> dict[str, int]:
    from sqlalchemy import inspect, text

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {t: conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()
                    for t in inspect(conn).get_table_names()}
    finally:
        engine.dispose()


def _plant(url: str, table: str) -> None:
    from sqlalchemy import text

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for sql in _FAULT[engine.dialect.name]:
                conn.execute(text(sql.format(table=table)))
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend, films", [("sqlite", True), ("postgresql", False)])
def test_a_demo_that_fails_part_way_into_a_database_holding_data_adds_nothing(
        request: pytest.FixtureRequest, tmp_path: Path, backend: str, films: bool) -> None:
    """The films (made first) and the demo are added in one transaction: a refusal at the demo's messages leaves
    neither."""
    url = str(request.getfixturevalue("db_url" if backend == "sqlite" else "pg_url"))
    res = pxp("--db", url, "import", "transcripts", str(transcripts(tmp_path)), "--name", "mine")
    assert res.exit_code == 0, res.output
    _plant(url, "message")  # refused after the datasets, instances, runs and sessions went in
    before = _rows(url)
    store.forget_engine(url)
    res = pxp("--db", url, "demo", *(["--films"] if films else []))
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert res.stderr.startswith("error: ") and "the demo was not made (" in res.stderr, res.stderr
    assert res.stderr.rstrip().endswith("; nothing of it was kept") and len(res.stderr.splitlines()) == 1
    store.forget_engine(url)
    assert _rows(url) == before and before["message"] > 0 and before["dataset"] >= 1
    assert experiments(url) == ["mine"]


def test_the_demo_added_to_a_database_holding_data_is_the_demo_made_alone(tmp_path: Path) -> None:
    """Added in one transaction under new ids (pxp.storage.transfer), the demo reports and validates as the demo
    made in a database of its own, and its runs' case orders and carried sessions follow the new ids."""
    alone, mixed = f"sqlite:///{tmp_path / 'alone.db'}", f"sqlite:///{tmp_path / 'mixed.db'}"
    assert pxp("--db", alone, "demo").exit_code == 0
    assert pxp("--db", mixed, "import", "transcripts", str(transcripts(tmp_path)), "--name", "mine").exit_code == 0
    assert pxp("--db", mixed, "demo").exit_code == 0
    for exp in ("demo-rad-simulated", "demo-drug-simulated"):
        reports = [pxp("--db", u, "report", "--experiment", exp, "--format", "json").stdout for u in (alone, mixed)]
        assert json.loads(reports[0]) == json.loads(reports[1])
    res = pxp("--db", mixed, "validate")
    assert res.exit_code == 0, res.output
    from sqlalchemy import text

    with get_engine(mixed).connect() as conn:
        orders = conn.execute(text("SELECT r.instance_order, e.config FROM run r JOIN experiment e "
                                   "ON e.id = r.experiment_id WHERE e.name LIKE 'demo-%'")).all()
        ids = {i for (i,) in conn.execute(text("SELECT i.id FROM instance i JOIN dataset d ON d.id = i.dataset_id "
                                               "WHERE d.name LIKE 'demo-%'"))}
        carried = [json.loads(c)["carried_sessions"] for (c,) in conn.execute(text(
            "SELECT c.content FROM context c JOIN session s ON s.id = c.session_id JOIN run r ON r.id = s.run_id "
            "JOIN experiment e ON e.id = r.experiment_id WHERE e.name LIKE 'demo-%'"))]
        demo_sessions = {i for (i,) in conn.execute(text(
            "SELECT s.id FROM session s JOIN run r ON r.id = s.run_id JOIN experiment e ON e.id = r.experiment_id "
            "WHERE e.name LIKE 'demo-%'"))}
    assert orders and all(set(json.loads(o)) <= ids for o, _ in orders)
    assert any(carried) and all(set(c) <= demo_sessions for c in carried)
