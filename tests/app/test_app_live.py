"""Live experiments: atomic claims, resume, take-over, exactly-once human steps (SQLite and
PostgreSQL), and the browser human's tag rule (DESIGN §1, "The human in the browser")."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import Answer, Facts
from pxp.agents.browser import answer_changed, human_turn
from pxp.data.pixels import read_header
from pxp.protocols.pxp.rules import Tag
from pxp.running.pxp.live.abandonment import abandoned_sessions, take_over
from pxp.running.pxp.live.assignment import LiveError, claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import load_session, machine_for, machine_step, submit_human
from pxp.storage.tables import Session, utcnow
from tests.app import test_app
from tests.factories import live_session_at_j2, make_drug, make_rad, make_rad_images, race

app_db = test_app.app_db  # the app's fixture: a fresh SQLite database, no API keys


def test_concurrent_claims_never_share_a_session(any_engine: Engine) -> None:
    make_rad(any_engine, per_label=2)  # 10 instances
    eid = create_live_experiment(any_engine, dataset="toy-rad")
    people = [ensure_annotator(any_engine, name=f"annotator {i}") for i in range(12)]
    got = race(12, lambda i: claim_next(any_engine, experiment_id=eid, annotator_id=people[i]))
    claimed = [g for g in got if g is not None]
    assert len(claimed) == 10 and len(set(claimed)) == 10, got
    with DB(any_engine) as db:
        rows = db.exec(select(Session)).all()
        assert len({r.instance_id for r in rows}) == 10
        assert len({r.annotator_id for r in rows}) == 10
    # a second claim by the same person resumes their own open session
    winner = next(i for i, g in enumerate(got) if g is not None)
    assert claim_next(any_engine, experiment_id=eid, annotator_id=people[winner]) == got[winner]


def test_take_over_an_abandoned_session_once(any_engine: Engine) -> None:
    make_rad(any_engine, per_label=1)
    eid = create_live_experiment(any_engine, dataset="toy-rad")
    gone = ensure_annotator(any_engine, name="left early")
    sid = claim_next(any_engine, experiment_id=eid, annotator_id=gone)
    assert sid is not None
    assert abandoned_sessions(any_engine, experiment_id=eid, idle_minutes=30) == []
    with any_engine.begin() as c:
        c.execute(update(Session).where(Session.id == sid)  # type: ignore[arg-type]
                  .values(updated_at=utcnow() - timedelta(hours=2)))
    idle = abandoned_sessions(any_engine, experiment_id=eid, idle_minutes=30)
    assert [a.session_id for a in idle] == [sid] and idle[0].annotator == "left early"
    takers = [ensure_annotator(any_engine, name=f"taker {i}") for i in range(6)]
    won = race(6, lambda i: take_over(any_engine, session_id=sid, annotator_id=takers[i]))
    assert sum(bool(w) for w in won) == 1
    who = takers[[bool(w) for w in won].index(True)]
    assert claim_next(any_engine, experiment_id=eid, annotator_id=who) == sid


def test_concurrent_submissions_store_one_message(any_engine: Engine) -> None:
    make_drug(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-drug")
    me = ensure_annotator(any_engine, name="chemist")
    sid = claim_next(any_engine, experiment_id=eid, annotator_id=me)
    assert sid is not None
    machine = machine_for(any_engine, eid)
    assert machine_step(any_engine, sid, machine) is not None
    assert machine_step(any_engine, sid, machine) is None, "not the machine's turn any more"
    s = load_session(any_engine, sid)
    answer = Answer(s.messages[0].prediction, s.messages[0].explanation)
    facts = Facts(True, True, False)
    outs = race(6, lambda i: submit_human(any_engine, sid, j=2, answer=answer, facts=facts))
    statuses = sorted(o.status for o in outs)  # type: ignore[attr-defined]
    assert statuses.count("sent") == 1 and statuses.count("already") == 5
    assert len(load_session(any_engine, sid).messages) == 2


def test_refused_tag_writes_nothing(engine: Engine) -> None:
    make_rad(engine)
    sid = live_session_at_j2(engine, "toy-rad")
    out = submit_human(engine, sid, j=2, answer=Answer("Pneumonia", "x"),
                       facts=Facts(False, False, False, tag=Tag.RATIFY))
    assert out.status == "refused" and "RATIFY" in out.message
    assert len(load_session(engine, sid).messages) == 1


def test_live_experiment_errors_are_one_line(engine: Engine) -> None:
    with pytest.raises(LiveError, match="no dataset named"):
        create_live_experiment(engine, dataset="missing")
    make_rad(engine)
    with pytest.raises(LiveError, match="n must be at least 2"):
        create_live_experiment(engine, dataset="toy-rad", n=1)
    with pytest.raises(LiveError, match="enter your name"):
        ensure_annotator(engine, name="   ")


@pytest.mark.parametrize(
    ("j", "k", "match", "agree", "changed", "chosen", "tag", "refused"),
    [
        (2, 3, False, False, False, None, Tag.REFUTE, None),
        (2, 3, True, True, False, None, Tag.RATIFY, None),
        (4, 3, False, False, False, None, Tag.REJECT, None),
        (4, 3, True, False, True, None, Tag.REVISE, None),
        (2, 3, None, None, False, Tag.REVISE, None, "REVISE is impossible at message 2"),
        (2, 3, None, None, False, Tag.REJECT, None, "REJECT is only allowed after message 3"),
        (4, 3, None, None, False, Tag.REVISE, None, "REVISE needs a changed answer"),
        (4, 3, None, None, True, Tag.REFUTE, None, "REFUTE keeps the answer"),
        (4, 3, None, None, False, Tag.RATIFY, Tag.RATIFY, None),  # implied facts recorded
        (4, 3, False, False, False, Tag.RATIFY, None, "RATIFY contradicts your answers"),
        (4, 3, False, None, False, Tag.RATIFY, None, "RATIFY contradicts your answers"),
        (2, 3, True, True, False, Tag.REFUTE, None, "REFUTE contradicts your answers"),
        (4, 3, None, None, False, None, None, "answer both questions"),
    ],
)
def test_human_turn(j: int, k: int, match: bool | None, agree: bool | None, changed: bool,
                    chosen: Tag | None, tag: Tag | None, refused: str | None) -> None:
    t = human_turn(j, k, match=match, agree=agree, changed=changed, chosen=chosen)
    if refused:
        assert t.refused is not None and refused in t.refused and "\n" not in t.refused
        assert not t.ok
    else:
        assert t.ok and t.tag is tag and t.facts is not None
        if chosen is not None:
            assert t.facts.tag is chosen


def test_ratify_with_an_edited_prediction_that_no_longer_matches_is_refused() -> None:
    t = human_turn(4, 3, match=True, agree=True, changed=True, chosen=Tag.RATIFY,
                   new_prediction_matches=False)
    assert not t.ok and t.refused is not None and "no longer" in t.refused


def test_answer_changed_uses_match() -> None:
    prev = Answer("CC(=O)O.Nc1ccccc1", "Amide coupling.")
    assert not answer_changed(Answer("Nc1ccccc1.OC(C)=O", " Amide   coupling. "), prev, match_kind="smiles")
    assert answer_changed(Answer("Nc1ccccc1.OC(C)=O", "Other."), prev, match_kind="smiles")
    assert not answer_changed(Answer("x", "y"), None)


def test_concurrent_machine_steps_store_one_reply(any_engine: Engine) -> None:
    make_rad(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-rad")
    sid = claim_next(any_engine, experiment_id=eid, annotator_id=ensure_annotator(any_engine, name="r"))
    assert sid is not None
    machine = machine_for(any_engine, eid)
    got = race(6, lambda i: machine_step(any_engine, sid, machine))
    assert sum(g is not None for g in got) == 1
    msgs = load_session(any_engine, sid).messages
    assert [m.j for m in msgs] == [1], "no human message was invented"


def test_a_kept_answer_tag_after_an_edit_says_why() -> None:
    """RATIFY chosen after editing the answer is refused with the reason, not a bare "not allowed"."""
    turn = human_turn(4, 3, match=None, agree=None, changed=True, chosen=Tag.RATIFY)
    assert not turn.ok and turn.refused is not None
    assert "edited" in turn.refused and "REVISE" in turn.refused


def test_a_prepared_case_has_its_image_ready_too(app_db: tuple[str, Engine]) -> None:
    """The app's preparation (pxp.app.prepare) stores the next case's INIT and makes its X-ray's viewer
    payload into the server's cache, so the case opens without decoding its film; it starts only after
    its settling time (the case just served is drawn first)."""
    from pxp.app import ui
    from pxp.app.prepare import prepare_next_case
    from pxp.llm.bytecache import cache_of
    from pxp.running.pxp.live.prepare import machine_step_once

    url, engine = app_db
    make_rad_images(engine, per_label=1, size=(900, 700))
    eid = create_live_experiment(engine, dataset="toy-rad-img")
    ann = ensure_annotator(engine, name="ann")
    first = claim_next(engine, experiment_id=eid, annotator_id=ann)
    assert first is not None and machine_step_once(engine, first, machine_for(engine, eid)) is not None
    cache_of(ui._pixels).clear()
    preparing = prepare_next_case(eid, ann, settle=2.0)
    with DB(engine) as db:  # it waits while the page draws the case just served: nothing claimed yet
        assert db.exec(select(Session).where(Session.annotator_id == ann, Session.id != first)).all() == []
    preparing.result(timeout=60)
    with DB(engine) as db:
        [ready] = db.exec(select(Session).where(Session.annotator_id == ann, Session.id != first)).all()
    assert [m.tag.value for m in load_session(engine, ready.id or 0).messages] == ["INIT"]
    cached = cache_of(ui._pixels).get(((url, ready.instance_id), ()))
    assert cached is not None and read_header(cached)["w"] == 900


def test_stopping_drops_a_preparation_still_waiting_to_start(app_db: tuple[str, Engine]) -> None:
    """A process that stops serving (pxp.app.prepare.stop_preparations) prepares nothing more: a preparation still
    in its settling time ends at once without claiming a case; one asked for afterwards runs as before."""
    from pxp.app.prepare import prepare_next_case, stop_preparations
    from pxp.running.pxp.live.prepare import machine_step_once

    _, engine = app_db
    make_rad(engine)
    eid = create_live_experiment(engine, dataset="toy-rad")
    ann = ensure_annotator(engine, name="ann")
    first = claim_next(engine, experiment_id=eid, annotator_id=ann)
    assert first is not None and machine_step_once(engine, first, machine_for(engine, eid)) is not None

    def others() -> list[Session]:
        with DB(engine) as db:
            return list(db.exec(select(Session).where(Session.annotator_id == ann, Session.id != first)).all())

    preparing = prepare_next_case(eid, ann, settle=30.0)
    t0 = time.monotonic()
    stop_preparations()
    assert preparing.done() and time.monotonic() - t0 < 10, "a settling preparation is dropped, not waited out"
    assert others() == []
    prepare_next_case(eid, ann, settle=0.0).result(timeout=60)
    assert len(others()) == 1
