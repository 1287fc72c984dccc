"""A broken configuration never serves (docs/operations.md, Troubleshooting): `pxp app` checks every
secrets file Streamlit reads and the database URL first, and stops with one line and exit 1; under
`streamlit run` every page shows only that line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.config_option import ConfigOption
from streamlit.testing.v1 import AppTest

from pxp.app import PAGE
from pxp.app.ui import escape_md
from pxp.storage.store import get_engine
from pxp.team.config import ConfigError, check_database, read_secrets

APP = str(PAGE)  # the page script the server runs for every visit
GOOD_AUTH = (b'[auth]\nredirect_uri = "http://localhost:8501/oauth2callback"\ncookie_secret = "' + b"x" * 32
             + b'"\nclient_id = "pxp"\nclient_secret = "s"\n'
             b'server_metadata_url = "http://localhost:1/.well-known/openid-configuration"\n')

BROKEN = {
    "unclosed string": (b'[auth]\nredirect_uri = "http://x/oauth2callback\n', r"secrets.toml:2: not valid TOML"),
    "misspelt table": (b'[auht]\nredirect_uri = "x"\n', r"did you mean \[auth\]\?"),
    "duplicated table": (GOOD_AUTH + b'[auth]\nx = 1\n', r"secrets.toml:\d+: .*\[auth\] is declared twice"),
    "invalid UTF-8": (b'# comment\nOPENAI_API_KEY = "\xff\xfe"\n', r"secrets.toml:2: not UTF-8 text"),
    "auth lacking what login needs": (b'[auth]\nredirect_uri = "http://x/oauth2callback"\n',
                                      r"\[auth\] lacks cookie_secret"),
    "provider lacking its id": (b'[auth]\nredirect_uri = "http://x/oauth2callback"\ncookie_secret = "c"\n'
                                b'[auth.google]\nclient_secret = "s"\nserver_metadata_url = "http://m"\n',
                                r"\[auth.google\] lacks client_id"),
}


def pxp_app(cwd: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PXP_DATABASE_URL"}
    env["HOME"] = str(home or cwd)
    return subprocess.run([sys.executable, "-m", "pxp.cli.main", "app", "--port", "1", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_secrets_file_stops_pxp_app_with_one_line(tmp_path: Path, case: str) -> None:
    content, line = BROKEN[case]
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_bytes(content)
    with pytest.raises(ConfigError, match=line):
        read_secrets([tmp_path / ".streamlit" / "secrets.toml"])
    if case not in ("misspelt table", "invalid UTF-8"):
        return  # `pxp app` itself (a process start each) for two of them
    done = pxp_app(tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / ".streamlit" / "secrets.toml") in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "pxp.db").exists()


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "secrets.toml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD_AUTH)
    assert read_secrets([path]).login_on
    path.write_bytes(b"\xef\xbb\xbfOPENAI_API_KEY = 'k'\n")
    assert not read_secrets([path]).login_on


@pytest.mark.parametrize(("url", "line"), [
    ("not a url", "is not a URL"),
    ("mysql://u@h/d", "in SQLite or PostgreSQL, not 'mysql'"),
    ("postgresql+psycopg://postgres@127.0.0.1:1/test", "the database server cannot be reached"),
    ("sqlite:////no/such/folder/pxp.db", "does not exist"),
])
def test_a_bad_database_url_stops_pxp_app(tmp_path: Path, url: str, line: str) -> None:
    with pytest.raises(ConfigError, match=line):
        check_database(url)
    if "mysql" in url or "no/such" in url:
        return  # `pxp app` itself (a process start each) for two of them
    done = pxp_app(tmp_path, "--db", url)
    assert done.returncode == 1 and line in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_another_applications_database_stops_pxp_app(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    done = pxp_app(tmp_path, "--db", f"sqlite:///{tmp_path / 'other.db'}")
    assert done.returncode == 1 and "another application's database" in done.stderr


def test_under_streamlit_run_a_broken_secrets_file_serves_only_its_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit import config

    secrets = tmp_path / "secrets.toml"
    secrets.write_bytes(BROKEN["misspelt table"][0])
    monkeypatch.setenv("PXP_DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    get_engine(f"sqlite:///{tmp_path / 'app.db'}")
    before = config.get_option("secrets.files")
    config.set_option("secrets.files", [str(secrets)])
    try:
        for page in ("home", "annotate", "settings", "audit", "datasets"):
            at = AppTest.from_file(APP, default_timeout=60)
            at.run()
            at.switch_page(str(Path(APP).parent / "views" / f"{page}.py"))
            at.run()
            assert [e.value for e in at.error] == [escape_md(f"{secrets}: 'auht' is not a setting pxp knows: did "
                                                             "you mean [auth]? Rename it, or remove it")]
            assert not at.exception and not at.button and not at.text_input and not at.markdown
    finally:
        config.set_option("secrets.files", before, ConfigOption.DEFAULT_DEFINITION)


def test_a_byte_order_mark_reaches_streamlits_login_too(tmp_path: Path) -> None:
    """Streamlit's own reader refuses a file with a byte-order mark; the app hands it what pxp read, so login
    (st.login reads st.secrets["auth"]) sees the same [auth] the check saw."""
    import streamlit as st
    from streamlit import config

    from pxp.app import resources

    secrets = tmp_path / "secrets.toml"
    secrets.write_bytes(b"\xef\xbb\xbf" + GOOD_AUTH)
    before = config.get_option("secrets.files")
    config.set_option("secrets.files", [str(secrets)])
    st.secrets._reset()
    try:
        assert not st.secrets.load_if_toml_exists()  # Streamlit alone: not loaded
        assert resources.auth_configured()
        assert st.secrets["auth"]["client_id"] == "pxp"
    finally:
        config.set_option("secrets.files", before, ConfigOption.DEFAULT_DEFINITION)
        st.secrets._programmatic_secrets = None  # what the app handed over stays out of other tests
        st.secrets._reset()
