"""Annotate when the database stops answering (docs/operations.md, Troubleshooting), and the typed reply under
the text rule: one line, no driver
text; the typed reply stays in the form, and Send works once the database is back (PostgreSQL, whose
connections a test can refuse and cut)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from pxp.app.ui import escape_md
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import get_engine, make_engine
from tests.app.test_app import all_msgs, by_suffix, current, login, new_app, ok, plain, texts
from tests.factories import make_rad

EXPLANATION = "A visceral pleural line at the apex with no lung markings beyond it."


@pytest.fixture
def pg_app(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Engine, Engine, str]]:
    monkeypatch.setenv("PXP_DATABASE_URL", pg_url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(pg_url)
    admin = make_engine(pg_url.rsplit("/", 1)[0] + "/postgres")
    name = str(engine.url.database)
    yield engine, admin, name
    _allow(admin, name, True)
    admin.dispose()


def _allow(admin: Engine, name: str, allowed: bool) -> None:
    with admin.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {str(allowed).lower()}'))
        if not allowed:
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = :d AND pid <> pg_backend_pid()"), {"d": name})


@pytest.mark.postgres
def test_send_while_the_database_is_away_keeps_the_reply(pg_app: tuple[Engine, Engine, str]) -> None:
    engine, admin, name = pg_app
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, msgs = current(engine)
    assert [m.tag for m in msgs] == ["INIT"]
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
    by_suffix(at.text_area, "_expl").input(EXPLANATION)
    ok(at.run())
    _allow(admin, name, False)
    ok(by_suffix(at.button, "_send").click().run())
    lines = [e.value for e in at.error]
    shown = engine.url.render_as_string(hide_password=True)
    assert len(lines) == 1 and lines[0].startswith(escape_md(f"The database {shown} is not answering")), lines
    assert not any(leak in texts(at) for leak in ("[SQL", "psycopg.", "OperationalError", "Traceback"))
    ok(at.run())  # still away: the same one line, nothing else breaks
    _allow(admin, name, True)
    ok(at.run())
    assert by_suffix(at.text_area, "_expl").value == EXPLANATION  # the typed reply is still in the form
    assert by_suffix(at.selectbox, "_pred").value == "Pneumothorax"
    ok(by_suffix(at.button, "_send").click().run())
    stored = all_msgs(engine, sid)
    assert len(stored) >= 2 and stored[1].explanation == EXPLANATION and stored[1].prediction == "Pneumothorax"


def test_the_typed_reply_follows_the_text_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/development.md "The text rule": a NUL in the explanation is refused in one line and nothing is
    sent; zero-width characters and a decomposed accent in it are stored as typed, NFC; an experiment name
    loses its zero-width characters."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    engine = get_engine(url)
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, _ = current(engine)
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
    by_suffix(at.text_area, "_expl").input("Apical line\x00 seen.")
    ok(at.run())
    assert "Cannot send: your explanation: contains the control character U+0000" in plain(texts(at))
    ok(by_suffix(at.button, "_send").click().run())
    assert len(all_msgs(engine, sid)) == 1
    by_suffix(at.text_area, "_expl").input("Pleural line at the apex, no markings beyond: pneumothorax (ple\u0301vre).")
    ok(at.run())
    ok(by_suffix(at.button, "_send").click().run())
    stored = all_msgs(engine, sid)
    assert stored[1].explanation == "Pleural line at the apex, no markings beyond: pneumothorax (pl\u00e9vre)."
    exp = create_experiment(engine, RunConfig(dataset="toy-rad"), name="Zero\u200bwidth  run")
    assert exp.name == "Zerowidth run"
