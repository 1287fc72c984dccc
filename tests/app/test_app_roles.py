"""What each role sees and may do in the app with login on (docs/operations.md, Login and roles):
no "New live experiment" form for annotators (and the server refuses the creation), Home links only
to the role's pages, an annotator on no case list is told so, and the Sessions page names the case
and the annotator slot of an overlap experiment."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app.ui import escape_md
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.storage.audit import audit_events
from pxp.storage.tables import Experiment
from pxp.team.access import AccessDenied, create_live_as
from tests.app import test_app_auth
from tests.app.test_app_auth import ADA, ANN, RITA, app, texts

app_db = test_app_auth.app_db  # a fresh SQLite database with toy-rad and ann / rita / ada on the team
open_db = test_app_auth.open_db  # the same without a team (served without login)


def _experiments(engine: Engine) -> list[str]:
    with DB(engine) as db:
        return list(db.exec(select(Experiment.name)).all())


def test_an_annotator_has_no_new_experiment_form(app_db: Engine) -> None:
    create_live_experiment(app_db, dataset="toy-rad", name="live-team")
    at = app("annotate", user=ANN)
    assert at.session_state["annotate_sid"] is not None, "she annotates the existing experiment"
    assert "New live experiment" not in [t.label for t in at.sidebar.toggle]
    assert not [w for w in at.sidebar.text_input if w.key == "annotate_new_exp_name"]
    for user in (RITA, ADA):  # the roles that may create experiments keep the form
        at = app("annotate", user=user)
        assert "New live experiment" in [t.label for t in at.sidebar.toggle]


def test_an_annotator_never_creates_an_experiment_not_even_the_default_one(app_db: Engine) -> None:
    at = app("annotate", user=ANN)  # no live experiment on toy-rad yet
    assert _experiments(app_db) == [], "nothing created for an annotator"
    assert [i.value for i in at.info] == [
        "There is no live experiment on this dataset yet: ask a researcher or an admin to create one."]
    at = app("annotate", user=RITA)  # a researcher's first visit creates the default one
    assert len(_experiments(app_db)) == 1 and at.session_state["annotate_sid"] is not None


def test_the_server_refuses_a_creation_by_a_role_that_may_not(app_db: Engine) -> None:
    with pytest.raises(AccessDenied) as e:
        create_live_as(app_db, role="annotator", actor="ann@example.org", dataset="toy-rad", name="sneaky")
    assert str(e.value) == "Your role (annotator) may not create experiments: ask a researcher or an admin."
    with pytest.raises(AccessDenied):
        create_live_as(app_db, role=None, actor="eve@example.org", dataset="toy-rad")
    assert _experiments(app_db) == []
    trail = [(ev.actor, ev.action) for ev in audit_events(app_db)]
    assert ("ann@example.org", "refused") in trail and ("eve@example.org", "refused") in trail
    eid = create_live_as(app_db, role="researcher", actor="rita@example.org", dataset="toy-rad", name="ok")
    assert _experiments(app_db) == ["ok"]
    assert ("rita@example.org", "created") in [(ev.actor, ev.action) for ev in audit_events(app_db)]
    assert eid > 0


def _links(at) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(p.proto.label) for p in at.get("page_link")]


@pytest.mark.parametrize(("user", "links"), [
    (ANN, ["Start annotating", "Browse sessions"]),
    (RITA, ["Start annotating", "Browse sessions", "Run an experiment", "See how intelligible it was"]),
    (ADA, ["Start annotating", "Browse sessions", "Run an experiment", "See how intelligible it was"]),
])
def test_home_links_only_to_the_pages_of_the_role(app_db: Engine, user: dict[str, str], links: list[str]) -> None:
    at = app("home", user=user)
    assert _links(at) == links
    settings = "Choose an LLM on the Settings page" in texts(at)
    assert settings is (user is ADA), "only an admin is sent to the Settings page"


def test_home_without_login_links_to_every_page(open_db: Engine) -> None:
    at = app("home")
    assert _links(at) == ["Start annotating", "Browse sessions", "Run an experiment", "See how intelligible it was"]


def test_an_annotator_on_no_case_list_is_told_so(app_db: Engine) -> None:
    eid = create_live_experiment(app_db, dataset="toy-rad", name="listed",
                                 case_lists={"bob@example.org": ["atelectasis_0", "pneumonia_0"]})
    at = app("annotate", user=ANN)
    assert at.session_state["annotate_sid"] is None
    assert not at.success, "not 'every case has been annotated'"
    lines = [i.value for i in at.info]
    me = escape_md("ann@example.org")
    assert lines == [f"You ({me}) have no cases assigned in this experiment: ask a researcher "
                     "or an admin to put you on its case list."], lines
    # bob, who is on the list, is served his cases
    assert claim_next(app_db, experiment_id=eid, annotator_id=ensure_annotator(app_db, name="bob@example.org"))


def test_an_annotator_who_did_all_their_cases_is_thanked(app_db: Engine) -> None:
    eid = create_live_experiment(app_db, dataset="toy-rad", name="listed",
                                 case_lists={"ann@example.org": ["atelectasis_0"]})
    ann = ensure_annotator(app_db, name="ann@example.org")
    sid = claim_next(app_db, experiment_id=eid, annotator_id=ann)
    with app_db.begin() as c:
        c.exec_driver_sql(f"update session set status = 'finished' where id = {int(sid or 0)}")
    at = app("annotate", user=ANN)
    assert at.session_state["annotate_sid"] is None
    assert [s.value for s in at.success] == ["Every case of this experiment has been annotated. Thank you!"]


def test_sessions_page_names_the_case_and_the_annotator_slot(app_db: Engine) -> None:
    eid = create_live_experiment(app_db, dataset="toy-rad", name="pair", overlap=2)
    first = claim_next(app_db, experiment_id=eid, annotator_id=ensure_annotator(app_db, name="h1"))
    second = claim_next(app_db, experiment_id=eid, annotator_id=ensure_annotator(app_db, name="h2"))
    third = claim_next(app_db, experiment_id=eid, annotator_id=ensure_annotator(app_db, name="h3"))
    for sid, label in ((first, "case 1 · annotator slot 1"), (second, "case 1 · annotator slot 2"),
                       (third, "case 2 · annotator slot 1")):
        at = app("sessions", user=RITA, query={"session": str(sid)})
        assert [h.value for h in at.subheader] == [f"Session {sid} · pair · {label}"]
    solo = create_live_experiment(app_db, dataset="toy-rad", name="solo")
    sid = claim_next(app_db, experiment_id=solo, annotator_id=ensure_annotator(app_db, name="h1"))
    at = app("sessions", user=RITA, query={"session": str(sid)})
    assert [h.value for h in at.subheader] == [f"Session {sid} · solo · case 1"], "no slot when overlap is 1"
