"""Login and roles through AppTest (docs/operations.md, Login and roles): `[auth]` in the secrets and a seeded st.user.

Without login the Annotate page keeps its name box with the note that anyone can pick any name;
with login nobody sees a page before logging in, each role sees its pages only, a page or a
`?session=` beyond the role is refused in one line, a stale tab cannot write into a session
someone else now holds, and the admins' Audit page lists who did what.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from pxp.app import PAGE
from pxp.app.auth import OPEN_NOTE
from pxp.app.router import VIEWS
from pxp.app.ui import escape_md
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.storage.store import get_engine
from pxp.storage.tables import Annotator, Message, Session
from pxp.team.access import add_member
from tests.app.test_app import plain
from tests.factories import make_rad

APP = str(PAGE)  # the page script the server runs for every visit
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "client_id": "pxp", "client_secret": "s",
        "server_metadata_url": "http://localhost:1/.well-known/openid-configuration"}


def _rad_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Engine:
    """A fresh SQLite database with toy-rad, served by the app under test (PXP_DATABASE_URL)."""
    url = f"sqlite:///{tmp_path / name}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    engine = get_engine(url)
    make_rad(engine)
    return engine


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    engine = _rad_db(tmp_path, monkeypatch, "app.db")
    add_member(engine, "ann@example.org", "annotator")
    add_member(engine, "rita@example.org", "researcher")
    add_member(engine, "ada@example.org", "admin")
    yield engine


@pytest.fixture
def open_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """A database with no team: the only kind served without login (the open demo)."""
    yield _rad_db(tmp_path, monkeypatch, "open.db")


def app(page: str, user: dict[str, Any] | None = None, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if user is not None:
        at.secrets["auth"] = AUTH
        # a fresh login: the ID token's issue time is now unless the test gives one
        at.user = {"is_logged_in": False} if not user else {"is_logged_in": True, "iat": int(time.time()), **user}
    at.run()
    at.switch_page(str(VIEWS / f"{page}.py"))
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [plain(e.value) for e in at.error] + [c.value for c in at.caption]
    parts += [i.value for i in at.info] + [t.value for t in at.title]
    return "\n".join(str(p) for p in parts)


ANN = {"email": "ann@example.org", "name": "Ann Annotator"}
RITA = {"email": "Rita@Example.org", "name": "Rita Researcher"}
ADA = {"email": "ada@example.org", "name": "Ada Admin"}


def test_without_login_the_name_box_stays_with_its_note(open_db: Engine) -> None:
    at = app("annotate")
    assert at.sidebar.text_input(key="annotate_name") is not None
    assert OPEN_NOTE in [c.value for c in at.sidebar.caption]
    assert "anyone can pick any name" in OPEN_NOTE
    at = app("settings")  # local use: every page is open
    assert "may not open" not in texts(at)


def test_with_login_nobody_sees_a_page_before_logging_in(app_db: Engine) -> None:
    for page in ("home", "analytics", "annotate"):
        at = app(page, user={})
        assert [i.value for i in at.info] == ["This pxp server requires login."]
        assert [b.label for b in at.button] == ["Log in"]
        assert not at.title or [t.value for t in at.title] == ["pxp"]


def test_logout_ends_the_login_on_the_server(app_db: Engine) -> None:
    """A login cookie issued before the user's logout is refused (a copy taken before logging out
    gives no access); a later login works; another user is not affected."""
    from pxp.team.logins import record_logout

    issued = int(time.time()) - 600
    at = app("home", user={**ANN, "iat": issued})
    assert [i.value for i in at.info] != ["This pxp server requires login."]
    record_logout(app_db, "Ann@Example.org", issued)
    at = app("home", user={**ANN, "iat": issued})
    assert [i.value for i in at.info] == ["This pxp server requires login."]
    assert [w.value for w in at.warning] == [escape_md("You logged out after this login was made: log in again.")]
    assert [b.label for b in at.button] == ["Log in"]
    assert [i.value for i in app("home", user={**ANN, "iat": int(time.time()) + 1}).info] != [
        "This pxp server requires login."]
    assert not app("home", user={**RITA, "iat": issued}).warning


def test_a_login_older_than_the_maximum_age_is_refused(app_db: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    old = int(time.time()) - 13 * 3600
    at = app("home", user={**ANN, "iat": old})
    assert [w.value for w in at.warning] == [
        escape_md("Your login is older than 12 hours, the longest a login lasts here: log in again.")]
    monkeypatch.setenv("PXP_MAX_LOGIN_HOURS", "24")
    assert not app("home", user={**ANN, "iat": old}).warning
    monkeypatch.setenv("PXP_MAX_LOGIN_HOURS", "1")
    assert "older than 1 hours" in app("home", user={**ANN, "iat": int(time.time()) - 3700}).warning[0].value
    at = app("home", user={**ANN, "iat": None})
    assert [i.value for i in at.info] == ["This pxp server requires login."] and "no issue time" in at.warning[0].value


def test_someone_not_on_the_team_gets_one_line(app_db: Engine) -> None:
    at = app("home", user={"email": "eve@example.org", "name": "Eve"})
    assert len(at.error) == 1 and "is not on this study's team" in at.error[0].value
    assert "ask an admin to run pxp users add eve" in at.error[0].value and "\n" not in at.error[0].value


@pytest.mark.parametrize(("user", "page", "refused"), [
    (ANN, "annotate", False), (ANN, "sessions", False), (ANN, "analytics", True),
    (ANN, "experiments", True), (ANN, "datasets", True), (ANN, "audit", True),
    (RITA, "analytics", False), (RITA, "experiments", False), (RITA, "settings", True),
    (RITA, "audit", True), (ADA, "settings", False), (ADA, "audit", False), (ADA, "datasets", False),
])
def test_each_role_opens_its_pages_only(app_db: Engine, user: dict[str, str], page: str, refused: bool) -> None:
    at = app(page, user=user)
    errors = [plain(e.value) for e in at.error]
    role = {"ann@example.org": "annotator", "Rita@Example.org": "researcher"}.get(user["email"], "admin")
    line = f"Your role ({role}) may not open the {page.capitalize()} page."
    assert (line in errors) is refused, errors
    if refused:
        assert errors == [line]
    assert f"Logged in as **{user['name']}** ({role})" in [c.value for c in at.sidebar.caption]


def test_an_annotator_cannot_open_another_annotators_session_by_url(app_db: Engine) -> None:
    engine = app_db
    eid = create_live_experiment(engine, dataset="toy-rad", name="live-team")
    other = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name="bob@example.org"))
    mine = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name="ann@example.org"))
    at = app("sessions", user=ANN, query={"session": str(other)})
    assert [plain(e.value) for e in at.error] == [f"You may not open session '{other}': it is not one of yours."]
    at = app("sessions", user=ANN, query={"session": "1 OR 1=1"})
    assert [plain(e.value) for e in at.error] == ["You may not open session '1 OR 1=1': it is not one of yours."]
    at = app("sessions", user=ANN, query={"session": str(mine)})
    assert not at.error and [plain(h.value) for h in at.subheader] == [f"Session {mine} · live-team · case 2"]
    at = app("sessions", user=RITA, query={"session": str(other)})  # a researcher reads every session
    assert not at.error and [plain(h.value) for h in at.subheader] == [f"Session {other} · live-team · case 1"]
    # the annotator's session list holds only her own sessions
    at = app("sessions", user=ANN)
    assert at.selectbox(key="sessions_annotator").options == ["ann@example.org"]
    assert at.selectbox(key="sessions_open").options == [f"#{mine} · live-team · {_key(engine, mine)} · open"]


def _key(engine: Engine, sid: int | None) -> str:
    from pxp.storage.tables import Instance

    with DB(engine) as db:
        s = db.get(Session, sid)
        assert s is not None
        inst = db.get(Instance, s.instance_id)
        assert inst is not None
        return inst.key


def by_suffix(widgets: Any, suffix: str) -> Any:
    found = [w for w in widgets if w.key and str(w.key).endswith(suffix)]
    assert found, f"no widget with key ending {suffix!r}"
    return found[-1]


def test_a_stale_tab_cannot_write_after_the_session_changed_hands(app_db: Engine) -> None:
    engine = app_db
    at, sid = _ratify_ready(engine)
    with DB(engine) as db:
        me = db.exec(select(Annotator).where(Annotator.name == "ann@example.org")).one()
        s = db.get(Session, sid)
        assert s is not None and s.annotator_id == me.id
    bob = ensure_annotator(engine, name="bob@example.org")
    with engine.begin() as c:  # meanwhile the case was taken over by bob
        c.execute(update(Session).where(Session.id == sid).values(annotator_id=bob))  # type: ignore[arg-type]
    by_suffix(at.button, f"annotate_{sid}_2_send").click().run()
    assert not at.exception
    with DB(engine) as db:
        assert len(db.exec(select(Message).where(Message.session_id == sid)).all()) == 1, "nothing written"
    assert at.session_state["annotate_sid"] != sid, "the tab moved on to a case of her own"
    # ... and says so: one line that the reply was not sent, the typed reply kept to copy, audited
    [line] = [plain(e.value) for e in at.error]
    assert "was not sent" in line and "taken over by another annotator" in line, line
    with DB(engine) as db:
        first = db.exec(select(Message).where(Message.session_id == sid)).one()  # Yes, Yes: its answer
    assert [c.value for c in at.code] == [f"{first.prediction}\n\n{first.explanation}"]
    from pxp.storage.audit import audit_events

    refused = [e for e in audit_events(engine) if e.action == "refused"]
    assert [(e.actor, e.session_id, e.j) for e in refused] == [("ann@example.org", sid, 2)]
    by_suffix(at.button, "annotate_hide_refused").click().run()
    assert not at.error, "hidden on request"


def _ratify_ready(engine: Engine) -> tuple[AppTest, int]:
    """Ann on her first case of a new live experiment, Yes and Yes answered, Send not yet pressed."""
    create_live_experiment(engine, dataset="toy-rad")  # annotators create none (a researcher did)
    at = app("annotate", user=ANN)
    sid = at.session_state["annotate_sid"]
    by_suffix(at.button, "_match_yes").click().run()
    by_suffix(at.button, "_agree_yes").click().run()
    return at, int(sid)


def test_a_send_after_the_role_was_removed_says_it_was_not_sent(app_db: Engine) -> None:
    from pxp.storage.audit import audit_events
    from pxp.team.access import remove_member

    engine = app_db
    at, sid = _ratify_ready(engine)
    remove_member(engine, "ann@example.org")  # meanwhile an admin removed her from the team
    by_suffix(at.button, f"annotate_{sid}_2_send").click().run()
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 2 and "is not on this study" in errors[0] and "was not sent" in errors[1], errors
    assert len(at.code) == 1 and at.code[0].value.strip()
    with DB(engine) as db:
        assert len(db.exec(select(Message).where(Message.session_id == sid)).all()) == 1, "nothing written"
    refused = [(e.actor, e.session_id, e.j) for e in audit_events(engine) if e.action == "refused"]
    assert refused == [("ann@example.org", sid, 2)]


def test_the_audit_page_lists_who_did_what(app_db: Engine) -> None:
    engine = app_db
    at, sid = _ratify_ready(engine)
    by_suffix(at.button, "_send").click().run()
    at = app("audit", user=ADA)
    table = at.dataframe[0].value
    rows = list(zip(table["who"], table["did"], table["session"], strict=True))
    assert ("ann@example.org", "answered", sid) in rows and ("ann@example.org", "opened", sid) in rows
    # a missing value reads "—", never the word "None"
    assert not table.isna().any().any() and "None" not in table.astype(str).to_numpy()
    assert "—" in set(table["detail"]) | set(table["message"])
    at.text_input(key="audit_session").input("abc").run()
    assert [plain(e.value) for e in at.error] == ["'abc' is not a session id (a whole number)."]
    del engine


def test_every_write_of_the_app_names_who_did_it(app_db: Engine) -> None:
    """Creating a live experiment (a researcher's first Annotate start on a dataset) and saving the
    settings are in the audit trail with the logged-in user who did them (docs/operations.md, Login and roles; every
    write
    records who)."""
    at = app("annotate", user=RITA)
    assert at.session_state["annotate_sid"] is not None  # the experiment was created, a case claimed
    at = app("settings", user=ADA)
    next(b for b in at.button if b.label == "Save").click().run()
    assert not at.exception
    at = app("audit", user=ADA)
    table = at.dataframe[0].value
    pairs = set(zip(table["who"], table["did"], strict=True))
    assert ("rita@example.org", "created") in pairs
    assert ("ada@example.org", "saved settings") in pairs
    assert ("rita@example.org", "opened") in pairs
