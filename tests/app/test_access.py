"""Roles and the server-side session check (docs/operations.md, Login and roles), on SQLite and PostgreSQL: the team
table, `submit_as` refusing writes into another annotator's session (forged id, stale tab after a
take-over), and the audit trail of opened / answered / took over / abandoned / refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import Answer, Facts
from pxp.running.pxp.live.abandonment import take_over
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import load_session, machine_for, machine_step
from pxp.storage.audit import audit_events
from pxp.storage.tables import Message, Session, TeamMember, utcnow
from pxp.team.access import (
    AccessDenied,
    TeamError,
    add_member,
    at_least,
    check_session,
    may_open,
    members,
    refuse_stale,
    remove_member,
    role_for,
    submit_as,
)
from tests.factories import make_drug, make_rad, race


def test_role_table_emails_groups_and_highest_role(any_engine: Engine) -> None:
    assert role_for(any_engine, "boss@example.org") is None
    assert add_member(any_engine, " Boss@Example.org ", "ADMIN").status == "added"
    assert add_member(any_engine, "ann@example.org", "annotator").status == "added"
    assert add_member(any_engine, "radiology", "researcher", kind="group").status == "added"
    assert role_for(any_engine, "boss@example.org") == "admin"
    assert role_for(any_engine, "BOSS@example.org") == "admin", "emails compare case-insensitively"
    assert role_for(any_engine, "ann@example.org") == "annotator"
    # a group gives its role to someone not listed, and the highest matching role wins
    assert role_for(any_engine, "new@example.org", ["radiology"]) == "researcher"
    assert role_for(any_engine, "ann@example.org", ["radiology", "other"]) == "researcher"
    assert role_for(any_engine, None, ["nobody"]) is None
    # adding again updates the role, not a second row
    assert add_member(any_engine, "ann@example.org", "researcher").status == "updated"
    assert role_for(any_engine, "ann@example.org") == "researcher"
    with DB(any_engine) as db:
        assert len(db.exec(select(TeamMember)).all()) == 3
    assert next(m.role for m in members(any_engine)) == "admin"
    assert remove_member(any_engine, "ann@example.org") == "ann@example.org"
    assert remove_member(any_engine, "ann@example.org") is None
    assert role_for(any_engine, "ann@example.org") is None


def test_role_ranks() -> None:
    assert at_least("admin", "researcher") and at_least("researcher", "annotator")
    assert not at_least("annotator", "researcher") and not at_least(None, "annotator")
    assert not at_least("king", "annotator")


@pytest.mark.parametrize(("name", "role", "kind", "why"), [
    ("not-an-email", "admin", "email", "is not an email address"),
    ("a@b.c", "king", "email", "unknown role 'king'"),
    ("   ", "admin", "group", "a group name must have"),
    ("a@b.c", "admin", "team", "unknown kind 'team'"),
])
def test_bad_team_entries_are_one_line(engine: Engine, name: str, role: str, kind: str, why: str) -> None:
    with pytest.raises(TeamError, match=why) as e:
        add_member(engine, name, role, kind=kind)
    assert "\n" not in str(e.value)


def _session_with_machine_turn(engine: Engine) -> tuple[int, int, int, int]:
    """(experiment, session of ann with the machine's first message, ann, bob)."""
    make_drug(engine)
    eid = create_live_experiment(engine, dataset="toy-drug")
    ann = ensure_annotator(engine, name="ann@example.org")
    bob = ensure_annotator(engine, name="bob@example.org")
    sid = claim_next(engine, experiment_id=eid, annotator_id=ann)
    assert sid is not None
    assert machine_step(engine, sid, machine_for(engine, eid)) is not None
    return eid, sid, ann, bob


def _answer(engine: Engine, sid: int) -> tuple[Answer, Facts]:
    first = load_session(engine, sid).messages[0]
    return Answer(first.prediction, first.explanation), Facts(True, True, False)


def test_another_annotator_cannot_write_a_session_by_its_id(any_engine: Engine) -> None:
    _, sid, ann, bob = _session_with_machine_turn(any_engine)
    answer, facts = _answer(any_engine, sid)
    with pytest.raises(AccessDenied, match=f"session {sid} belongs to another annotator"):
        check_session(any_engine, sid, bob)
    with pytest.raises(AccessDenied, match="session 999999 does not exist"):
        check_session(any_engine, 999999, ann)
    assert may_open(any_engine, sid, ann) and not may_open(any_engine, sid, bob)
    out = submit_as(any_engine, sid, annotator_id=bob, j=2, answer=answer, facts=facts)
    assert out.status == "refused" and "belongs to another annotator" in out.message
    with DB(any_engine) as db:
        assert len(db.exec(select(Message).where(Message.session_id == sid)).all()) == 1
    out = submit_as(any_engine, sid, annotator_id=ann, j=2, answer=answer, facts=facts)
    assert out.status == "sent"
    assert len(load_session(any_engine, sid).messages) >= 2
    trail = [(e.actor, e.action, e.session_id) for e in reversed(audit_events(any_engine))]
    assert trail == [("ann@example.org", "opened", sid), ("bob@example.org", "refused", sid),
                     ("ann@example.org", "answered", sid)]


def test_a_stale_tab_cannot_write_after_a_take_over(any_engine: Engine) -> None:
    eid, sid, ann, bob = _session_with_machine_turn(any_engine)
    answer, facts = _answer(any_engine, sid)
    with any_engine.begin() as c:
        c.execute(update(Session).where(Session.id == sid)  # type: ignore[arg-type]
                  .values(updated_at=utcnow() - timedelta(hours=2)))
    with any_engine.begin() as c:  # the machine's message is old too: the session is idle
        c.execute(update(Message).where(Message.session_id == sid)  # type: ignore[arg-type]
                  .values(created_at=utcnow() - timedelta(hours=2)))
    assert take_over(any_engine, session_id=sid, annotator_id=bob, idle_minutes=30)
    # ann's tab still shows the case: her submit is refused, bob's goes through
    out = submit_as(any_engine, sid, annotator_id=ann, j=2, answer=answer, facts=facts)
    assert out.status == "refused"
    assert submit_as(any_engine, sid, annotator_id=bob, j=2, answer=answer, facts=facts).status == "sent"
    assert claim_next(any_engine, experiment_id=eid, annotator_id=bob) == sid
    trail = [(e.actor, e.action) for e in reversed(audit_events(any_engine, session_id=sid))]
    assert trail == [("ann@example.org", "opened"), ("ann@example.org", "abandoned"),
                     ("bob@example.org", "took over"), ("ann@example.org", "refused"),
                     ("bob@example.org", "answered")]
    assert [e.action for e in audit_events(any_engine, actor="bob@example.org")] == ["answered", "took over"]


def test_a_send_to_a_closed_or_taken_session_is_refused_and_audited(any_engine: Engine) -> None:
    """A closed session refuses the reply with a "refused" audit row; a stale tab's Send is named
    in words (taken over, closed) and audited the same way; the holder's open session is not refused."""
    _, sid, ann, bob = _session_with_machine_turn(any_engine)
    answer, facts = _answer(any_engine, sid)
    assert refuse_stale(any_engine, sid, annotator_id=ann, j=2) is None
    assert refuse_stale(any_engine, sid, annotator_id=bob, j=2) == "the case was taken over by another annotator"
    with any_engine.begin() as c:
        c.execute(update(Session).where(Session.id == sid).values(status="aborted"))  # type: ignore[arg-type]
    out = submit_as(any_engine, sid, annotator_id=ann, j=2, answer=answer, facts=facts)
    assert out.status == "closed" and out.message == "this session is aborted"
    assert refuse_stale(any_engine, sid, annotator_id=ann, j=2) == "the case is aborted"
    with DB(any_engine) as db:
        assert len(db.exec(select(Message).where(Message.session_id == sid)).all()) == 1
    refused = [(e.actor, e.j, e.detail) for e in reversed(audit_events(any_engine)) if e.action == "refused"]
    assert refused == [("bob@example.org", 2, "a stale tab's reply: the case was taken over by another annotator"),
                       ("ann@example.org", 2, "this session is aborted"),
                       ("ann@example.org", 2, "a stale tab's reply: the case is aborted")]


def _idle(engine: Engine, sid: int) -> None:
    """Make a session idle for two hours (its row and its messages), so it can be taken over."""
    with engine.begin() as c:
        c.execute(update(Session).where(Session.id == sid)  # type: ignore[arg-type]
                  .values(updated_at=utcnow() - timedelta(hours=2)))
        c.execute(update(Message).where(Message.session_id == sid)  # type: ignore[arg-type]
                  .values(created_at=utcnow() - timedelta(hours=2)))


def test_a_submit_racing_a_take_over_has_one_consistent_outcome(any_engine: Engine) -> None:
    """The holder's submit and another annotator's take-over released at once (tests/factories.race),
    round after round: exactly one wins. Either the answer is stored and the session stays the
    holder's, or the take-over happened and nothing was written; never both (access check
    and write in one transaction)."""
    make_rad(any_engine, per_label=4)
    eid = create_live_experiment(any_engine, dataset="toy-rad")
    ann = ensure_annotator(any_engine, name="ann@example.org")
    bob = ensure_annotator(any_engine, name="bob@example.org")
    machine = machine_for(any_engine, eid)
    for _ in range(20):
        sid = claim_next(any_engine, experiment_id=eid, annotator_id=ann)
        assert sid is not None
        assert machine_step(any_engine, sid, machine) is not None
        answer, facts = _answer(any_engine, sid)
        _idle(any_engine, sid)
        sent, took = race(2, lambda i, sid=sid, answer=answer, facts=facts: (
            submit_as(any_engine, sid, annotator_id=ann, j=2, answer=answer, facts=facts).status if i == 0
            else take_over(any_engine, session_id=sid, annotator_id=bob, idle_minutes=30)))
        with DB(any_engine) as db:
            s = db.get(Session, sid)
            assert s is not None
            holder, msgs = s.annotator_id, len(db.exec(select(Message).where(Message.session_id == sid)).all())
        assert (sent, took) in {("sent", False), ("refused", True)}, (sent, took)
        if sent == "sent":
            assert holder == ann and msgs >= 2, "the answer is kept and the session stays hers"
        else:
            assert holder == bob and msgs == 1, "taken over: nothing of hers written"
        actions = [e.action for e in audit_events(any_engine, session_id=sid)]
        assert ("answered" in actions) is (sent == "sent") and ("took over" in actions) is took
        with any_engine.begin() as c:  # ann's case is done either way: the next round claims a new one
            c.execute(update(Session).where(Session.id == sid).values(status="finished"))  # type: ignore[arg-type]
