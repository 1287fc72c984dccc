"""The app's server opens the database as it starts (pxp.app.server; docs/development.md, Reading a study): a
checkout's `streamlit run streamlit_app.py` migrates a fresh database and makes first start's demo before anyone
visits, and a broken configuration opens nothing, with one line in the server's log."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.browser.test_browser_app import _start_streamlit, _stop


def _server_log(tmp_path: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("server-*.log")))


def test_a_fresh_database_is_made_with_its_demo_before_any_visit(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    env = {**os.environ, "PXP_DATABASE_URL": f"sqlite:///{db}", "PXP_DEMO_FILMS": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, _, log = _start_streamlit(env, tmp_path)
    try:
        deadline, names = time.monotonic() + 90, set[str]()
        while time.monotonic() < deadline and "demo-drug-simulated" not in names:
            time.sleep(0.5)
            if db.exists():  # nothing but /_stcore/health was asked of the server
                engine = create_engine(f"sqlite:///{db}")
                try:
                    with engine.connect() as conn:
                        names = set(conn.execute(text("SELECT name FROM experiment")).scalars())
                except Exception:  # the tables are still being made
                    names = set()
                finally:
                    engine.dispose()
        assert {"demo-rad-simulated", "demo-drug-simulated"} <= names, _server_log(tmp_path)[-2000:]
    finally:
        _stop(proc)
        log.close()
    shown = _server_log(tmp_path)
    assert "missing ScriptRunContext" not in shown and "Traceback" not in shown, shown[-2000:]


def test_a_broken_configuration_opens_nothing_and_says_so_in_the_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".streamlit").mkdir(parents=True)
    secrets = home / ".streamlit" / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1/oauth2callback\ncookie_secret = "c"\n')
    db = tmp_path / "never.db"
    env = {**os.environ, "PXP_DATABASE_URL": f"sqlite:///{db}", "HOME": str(home),
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, _, log = _start_streamlit(env, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "until the configuration is mended" not in _server_log(tmp_path):
            time.sleep(0.2)
        shown = _server_log(tmp_path)
        assert f"until the configuration is mended: {secrets}:2: not valid TOML" in shown, shown[-2000:]
        assert not db.exists()
    finally:
        _stop(proc)
        log.close()
    assert "Traceback" not in _server_log(tmp_path)
