"""Every write of the Experiments, Datasets and Settings pages passes one server-side role check
(pxp.team.access.require, docs/operations.md, Login and roles), not only the router's page check: a fragment's rerun
skips the router, and so does running a page's script directly, as these tests do. A refusal is
one line and a "refused" audit row, nothing is stored; without login everything stays allowed.
An annotator with no dataset is not sent to the Datasets page they cannot open."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from pxp.app.prefs import load_prefs
from pxp.app.router import NEEDS, VIEWS
from pxp.app.ui import escape_md
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.experiments import create_experiment
from pxp.running.workers import pool as workers
from pxp.storage.audit import audit_events
from pxp.storage.tables import Dataset, Experiment
from pxp.team.access import MAY, AccessDenied, require
from tests.app import test_app_auth
from tests.app.test_app_auth import ADA, ANN, AUTH, RITA, app, plain

app_db = test_app_auth.app_db  # a fresh SQLite database with toy-rad and ann / rita / ada on the team


def direct(page: str, user: dict[str, Any] | None) -> AppTest:
    """The page's script run without the router (as a fragment's rerun is), logged in as `user`."""
    at = AppTest.from_file(str(VIEWS / f"{page}.py"), default_timeout=60)
    if user is not None:
        at.secrets["auth"] = AUTH
        at.user = {"is_logged_in": True, "iat": int(time.time()), **user}  # a fresh login
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _refusals(engine: Engine) -> list[tuple[str, str]]:
    return [(ev.actor, ev.detail) for ev in audit_events(engine) if ev.action == "refused"]


def test_require_refuses_in_one_line_and_audits(app_db: Engine) -> None:
    for action in MAY:
        with pytest.raises(AccessDenied) as e:
            require(app_db, action, role="annotator", actor="ann@example.org", detail="x")
        assert str(e.value).startswith(f"Your role (annotator) may not {action}: ask ")
        assert "\n" not in str(e.value)
        require(app_db, action, role="admin", actor="ada@example.org")  # an admin may do everything
    with pytest.raises(AccessDenied) as e:
        require(app_db, "save settings", role="researcher", actor="rita@example.org")
    assert str(e.value) == "Your role (researcher) may not save settings: ask an admin."
    with pytest.raises(AccessDenied):
        require(app_db, "start experiments", role=None, actor="eve@example.org")
    refused = _refusals(app_db)
    assert len(refused) == len(MAY) + 2
    assert ("rita@example.org", "save settings") in refused and ("ann@example.org", "import datasets: x") in refused


def test_what_a_page_writes_needs_the_role_that_opens_it() -> None:
    """MAY and the router's NEEDS agree: a write is refused exactly to those the page is hidden from."""
    page = {"create experiments": "experiments.py", "start experiments": "experiments.py",
            "cancel experiments": "experiments.py", "import datasets": "datasets.py", "save settings": "settings.py"}
    assert {a: MAY[a] for a in page} == {a: NEEDS[p] for a, p in page.items()}


def _submit(at: AppTest, label: str) -> AppTest:
    next(b for b in at.get("form_submit_button") if b.label == label).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_experiments_form_is_refused_on_the_server(app_db: Engine) -> None:
    at = _submit(direct("experiments", ANN), "Create and start")
    line = ("Not started, nothing stored: Your role (annotator) may not create experiments: "
            "ask a researcher or an admin.")
    assert [e.value for e in at.error] == [escape_md(line)]
    with DB(app_db) as db:
        assert db.exec(select(Experiment)).all() == []
    assert _refusals(app_db) == [("ann@example.org", "create experiments: controlled experiment on toy-rad")]


def test_saving_settings_is_refused_on_the_server_and_allowed_without_login(app_db: Engine) -> None:
    before = load_prefs(app_db)
    at = direct("settings", RITA)
    at.text_input(key="settings_generator").set_value("openai:gpt-4.1")
    _submit(at, "Save")
    assert [plain(e.value) for e in at.error] == ["Your role (researcher) may not save settings: ask an admin."]
    assert not at.success and load_prefs(app_db) == before
    assert _refusals(app_db) == [("rita@example.org", "save settings")]
    for user in (ADA, None):  # an admin, and anyone without login (local use)
        at = direct("settings", user)
        at.number_input(key="settings_n").set_value(7)
        _submit(at, "Save")
        assert [s.value for s in at.success] == ["Saved. New experiments use these settings."]
        assert load_prefs(app_db).n == 7
        with app_db.begin() as c:
            c.exec_driver_sql("delete from appsetting")
    assert len(_refusals(app_db)) == 1


def _import(user: dict[str, str], name: str) -> AppTest:
    at = direct("datasets", user)
    at.selectbox(key="datasets_kind").set_value("generic").run()
    at.get("file_uploader")[0].upload("adr.csv", CSV, "text/csv")
    at.text_input(key="datasets_name").set_value(name)
    return _submit(at, "Import")


CSV = b"key,input,prediction,explanation\nc1,Rash after amoxicillin,Probable,Onset on day 3.\n"


def test_an_import_is_refused_on_the_server(app_db: Engine) -> None:
    at = _import(RITA, "sneaky")
    assert [plain(e.value) for e in at.error] == ["Your role (researcher) may not import datasets: ask an admin."]
    with DB(app_db) as db:
        assert db.exec(select(Dataset.name)).all() == ["toy-rad"]
    assert _refusals(app_db) == [("rita@example.org", "import datasets: generic adr.csv")]
    at = _import(ADA, "adr")  # the same upload by an admin is imported
    assert not at.error and at.success
    with DB(app_db) as db:
        assert sorted(db.exec(select(Dataset.name)).all()) == ["adr", "toy-rad"]


@pytest.mark.parametrize(("user", "line"), [
    (ANN, "There is no dataset yet: ask a researcher or an admin to import one."),
    (RITA, "There is no dataset yet: ask an admin to import one."),
    (ADA, "There is no dataset yet. Import one on the Datasets page."),
    (None, "There is no dataset yet. Import one on the Datasets page."),
])
def test_no_dataset_tells_whom_to_ask(app_db: Engine, user: dict[str, str] | None, line: str) -> None:
    app("home", user=user)  # the app starts on a database with a dataset (no demo data loaded)
    path = str(app_db.url.database)
    with sqlite3.connect(path) as raw:  # then the dataset goes (foreign keys off on this connection)
        raw.execute("delete from dataset")
        if user is None:  # served without login: only a database with no team is (login follows the team)
            raw.execute("delete from team_member")
    at = app("annotate", user=user)
    if user is None:  # without login: a name first
        at.sidebar.text_input(key="annotate_name").set_value("Dr. Rao").run()
    assert [w.value for w in at.warning] == [line]


def _click_in_fragment(at: AppTest, key: str) -> None:
    """Click a button of the progress fragment. AppTest reruns the whole script, where the button's
    st.rerun(scope="fragment") raises; the click's write (or refusal) has happened by then."""
    from streamlit import config

    was = config.get_option("client.showErrorDetails")
    config.set_option("client.showErrorDetails", "full")
    try:
        at.button(key=key).click().run()
    finally:
        config.set_option("client.showErrorDetails", was)
    for e in at.exception:
        assert "can only be specified from `@st.fragment`" in e.value, e.value


def test_cancel_in_the_progress_fragment_is_refused_on_the_server(app_db: Engine) -> None:
    """The Cancel button sits in a fragment whose reruns skip the router: the write checks the role."""
    exp = create_experiment(app_db, RunConfig(dataset="toy-rad"), name="running")
    eid = exp.id or 0
    assert workers.claim(app_db, eid, "appserver:1")  # a worker beating
    _click_in_fragment(direct("experiments", ANN), f"experiments_cancel_{eid}")
    with DB(app_db) as db:
        row = db.get(Experiment, eid)
        assert row is not None and row.status != "cancelled"
    assert workers.is_running(app_db, eid)
    assert _refusals(app_db) == [("ann@example.org", f"cancel experiments: experiment {eid}")]
    _click_in_fragment(direct("experiments", RITA), f"experiments_cancel_{eid}")  # a researcher's goes through
    with DB(app_db) as db:
        row = db.get(Experiment, eid)
        assert row is not None and row.status == "cancelled"
