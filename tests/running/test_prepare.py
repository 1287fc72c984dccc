"""The next case prepared in the background (pxp.running.pxp.live.prepare), on SQLite and PostgreSQL:
the next case is opened with the machine's INIT before the expert gets there, served next, never
produced twice (not even by two app servers on one PostgreSQL), returned to the pool when left idle,
and every session stays conformant."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.agents.base import Answer, Facts
from pxp.analysis.validate import validate
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.live.abandonment import abandoned_sessions, take_over
from pxp.running.pxp.live.assignment import LiveError, claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.prepare import machine_step_once, prepare_next
from pxp.running.pxp.live.turns import load_session, machine_for, submit_human
from pxp.storage.store import make_engine
from pxp.storage.tables import Message, Session, utcnow
from tests.factories import make_rad, make_rad_images, race
from tests.llm_server import FakeLLM, Reply, Request, answer, checker_reply


def _held(engine: Engine, annotator: int) -> list[int]:
    with DB(engine) as db:
        return list(db.exec(select(Session.id).where(Session.annotator_id == annotator, Session.status == "open")
                            .order_by(col(Session.ordinal))).all())


def test_the_next_case_is_ready_and_served_next(any_engine: Engine) -> None:
    make_rad(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-rad", n=4, k=3)
    ann = ensure_annotator(any_engine, name="ann")
    machine = machine_for(any_engine, eid)
    first = claim_next(any_engine, experiment_id=eid, annotator_id=ann)
    assert first is not None and machine_step_once(any_engine, first, machine) is not None
    seen: list[tuple[int, int]] = []  # (session, its messages) when `claimed` ran: before the INIT
    [ready] = prepare_next(any_engine, experiment_id=eid, annotator_id=ann, machine=machine,
                           claimed=lambda sid: seen.append((sid, len(load_session(any_engine, sid).messages))))
    assert seen == [(ready, 0)]
    assert prepare_next(any_engine, experiment_id=eid, annotator_id=ann, machine=machine) == []  # one ahead
    assert _held(any_engine, ann) == [first, ready]
    assert [m.tag.value for m in load_session(any_engine, ready).messages] == ["INIT"]
    assert claim_next(any_engine, experiment_id=eid, annotator_id=ann) == first  # this case first
    while (s := load_session(any_engine, first)).status == "open":  # the expert answers case 1 to its end
        mine = s.last_from(s.messages[0].sender)
        assert mine is not None
        if s.turn is not None and s.turn.value == "human":
            submit_human(any_engine, first, j=s.j, answer=Answer(mine.prediction, mine.explanation),
                         facts=Facts(True, True, False))
        else:
            machine_step_once(any_engine, first, machine)
    assert claim_next(any_engine, experiment_id=eid, annotator_id=ann) == ready  # shown at once: INIT is there
    assert prepare_next(any_engine, experiment_id=eid, annotator_id=ann, machine=machine, depth=0) == []
    assert validate(any_engine)[1] == []


def test_the_depth_is_the_experiments_own(any_engine: Engine) -> None:
    """Each live experiment keeps its own number of cases ready (0: off); a depth out of range or on a
    controlled experiment is refused in one line."""
    make_rad(any_engine)
    ann = ensure_annotator(any_engine, name="ann")
    for depth in (0, 2):
        eid = create_live_experiment(any_engine, dataset="toy-rad", name=f"depth {depth}", prepare=depth)
        machine = machine_for(any_engine, eid)
        first = claim_next(any_engine, experiment_id=eid, annotator_id=ann)
        assert first is not None and machine_step_once(any_engine, first, machine) is not None
        ready = prepare_next(any_engine, experiment_id=eid, annotator_id=ann, machine=machine)
        assert len(ready) == depth
        assert all([m.tag.value for m in load_session(any_engine, s).messages] == ["INIT"] for s in ready)
    with pytest.raises(LiveError, match=r"between 0 \(off\) and 5, got 6"):
        create_live_experiment(any_engine, dataset="toy-rad", name="too deep", prepare=6)
    with pytest.raises(RunError, match="live experiments only"):
        create_experiment(any_engine, RunConfig(dataset="toy-rad"), name="controlled", prepare=1)
    assert validate(any_engine)[1] == []


@pytest.fixture
def slow_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    def slow(req: Request) -> Reply:
        if req.is_checker:
            return checker_reply(req)
        time.sleep(0.5)  # the model takes a while: both servers reach the session meanwhile
        return answer("Pneumonia", "Patchy consolidation in the left lower zone.")

    with FakeLLM(slow) as s:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        yield s


@pytest.mark.postgres
def test_an_init_is_produced_once_by_two_app_servers(pg_engine: Engine, pg_url: str, slow_llm: FakeLLM) -> None:
    """Two app servers on one PostgreSQL (two engines, two machine agents) reach the same prepared
    session at once: the model is asked for its INIT once, and one INIT is stored."""
    make_rad_images(pg_engine, size=(64, 64))
    eid = create_live_experiment(pg_engine, dataset="toy-rad-img", machine="openai:gpt-test",
                                 base_url=slow_llm.openai_url)
    ann = ensure_annotator(pg_engine, name="ann")
    sid = claim_next(pg_engine, experiment_id=eid, annotator_id=ann)
    assert sid is not None
    servers = [make_engine(pg_url), make_engine(pg_url)]
    machines = [machine_for(e, eid) for e in servers]
    try:
        out = race(2, lambda i: machine_step_once(servers[i], sid, machines[i]))
    finally:
        for e in servers:
            e.dispose()
    assert sum(r is not None for r in out) == 1
    assert len(slow_llm.generator_requests()) == 1
    with DB(pg_engine) as db:
        assert [m.j for m in db.exec(select(Message).where(Message.session_id == sid)).all()] == [1]


def test_a_prepared_case_left_idle_goes_back_to_the_pool(any_engine: Engine) -> None:
    make_rad(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-rad")
    ann, bob = ensure_annotator(any_engine, name="ann"), ensure_annotator(any_engine, name="bob")
    machine = machine_for(any_engine, eid)
    first = claim_next(any_engine, experiment_id=eid, annotator_id=ann)
    assert first is not None and machine_step_once(any_engine, first, machine) is not None
    [ready] = prepare_next(any_engine, experiment_id=eid, annotator_id=ann, machine=machine)
    with any_engine.begin() as c:  # ann leaves: both her cases are idle for two hours
        old = utcnow().replace(year=2020)
        c.execute(update(Session).where(col(Session.id).in_([first, ready])).values(updated_at=old))
        c.execute(update(Message).where(col(Message.session_id).in_([first, ready])).values(created_at=old))
    idle = abandoned_sessions(any_engine, experiment_id=eid, idle_minutes=30, exclude_annotator=bob)
    assert ready in [a.session_id for a in idle]
    assert take_over(any_engine, session_id=ready, annotator_id=bob, idle_minutes=30)
    assert load_session(any_engine, ready).annotator == "bob"
