"""The engine's step(): one message per step, atomic, refusals, races (DESIGN §3)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, func
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import (
    AgentBase,
    AgentUnavailable,
    Answer,
    CallRecord,
    Facts,
    FormatFailure,
    Query,
)
from pxp.agents.proxy import HumanProxy
from pxp.analysis.validate import validate
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.running.pxp.engine import SessionClosed, StepConflict, TagRefused, interact_session, step
from pxp.storage.store import db_session, session_msgs
from pxp.storage.tables import Context, Experiment, Instance, LLMCall, Message, Run, Session
from pxp.tasks.base import match_label
from tests.factories import make_rad


class Scripted(AgentBase):
    """A test agent answering from a list (or a function of the query)."""

    label = "scripted"

    def __init__(self, answers: list[Answer] | Callable[[Query], Answer]) -> None:
        self.answers = answers
        self.asked = 0

    def ask(self, q: Query) -> Answer:
        self.asked += 1
        q.calls.append(CallRecord(provider="test", model="scripted", purpose="ask", tokens_in=3, tokens_out=2))
        if callable(self.answers):
            return self.answers(q)
        return self.answers[min(self.asked - 1, len(self.answers) - 1)]

    def match(self, y1: str, y2: str, q: Query) -> bool:
        return match_label(y1, y2)

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        return e1 == e2


def new_session(engine: Engine, n: int = 10, k: int = 3) -> int:
    ds = make_rad(engine, name=f"ds-{threading.get_ident()}-{id(engine)}-{n}-{k}")
    with db_session(engine) as db:
        count = db.exec(select(func.count()).select_from(Experiment)).one()
        exp = Experiment(name=f"e{count}", task="rad", n=n, k=k)
        db.add(exp)
        db.flush()
        run = Run(experiment_id=exp.id or 0)
        db.add(run)
        db.flush()
        inst = db.exec(select(Instance).where(Instance.dataset_id == ds)).first()
        assert inst is not None
        s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=1, n=n, k=k)
        db.add(s)
        db.flush()
        return s.id or 0


def status(engine: Engine, sid: int) -> tuple[str, str | None, str | None]:
    with DB(engine) as db:
        s = db.get(Session, sid)
        assert s is not None
        return s.status, s.stop_reason, s.abort_reason


def test_a_session_runs_to_a_double_ratify(any_engine: Engine) -> None:
    sid = new_session(any_engine)
    with DB(any_engine) as db:
        ref = db.get(Session, sid)
        assert ref is not None
    proxy = HumanProxy()
    machine = Scripted(lambda q: q.instance.reference)
    results = interact_session(any_engine, sid, {Sender.MACHINE: machine, Sender.HUMAN: proxy})
    assert [r.message.tag for r in results] == [Tag.INIT, Tag.RATIFY, Tag.RATIFY]
    assert results[-1].stopped == "ratified"
    assert status(any_engine, sid)[:2] == ("finished", "ratified")
    with DB(any_engine) as db:
        msgs = session_msgs(db, session_id=sid)
        assert [(m.sender, m.j) for m in msgs] == [(Sender.MACHINE, 1), (Sender.HUMAN, 2), (Sender.MACHINE, 3)]
        assert msgs[0].match is None and msgs[1].match is True and msgs[1].changed is False
        contexts = db.exec(select(Context).where(Context.session_id == sid)).all()
        assert sorted(c.j for c in contexts) == [1, 2, 3]
        calls = db.exec(select(LLMCall).where(LLMCall.session_id == sid)).all()
        assert len(calls) == 2 and all(c.tokens_in == 3 for c in calls)
        m1 = db.exec(select(Message).where(Message.session_id == sid, Message.j == 1)).one()
        assert m1.llm_call_id is not None and m1.receiver == "human"
    with pytest.raises(SessionClosed, match="finished"):
        step(any_engine, sid, {Sender.MACHINE: machine, Sender.HUMAN: proxy})
    assert validate(any_engine)[1] == []


def test_unchanged_answer_is_carried_verbatim(engine: Engine) -> None:
    sid = new_session(engine, k=5)
    machine = Scripted([Answer("Pneumonia", "consolidation"), Answer("pneumonia.", "consolidation")])
    proxy = HumanProxy()
    agents: dict[Sender, Any] = {Sender.MACHINE: machine, Sender.HUMAN: proxy}
    step(engine, sid, agents)
    step(engine, sid, agents)
    r = step(engine, sid, agents)
    # "pneumonia." matches "Pneumonia", so the machine did not change: it re-sends its message 1
    assert r.message.changed is False and r.message.prediction == "Pneumonia"


def test_human_in_the_browser_supplies_facts_and_a_forbidden_tag_is_refused(engine: Engine) -> None:
    sid = new_session(engine, k=3)

    class Browser(Scripted):
        def __init__(self, facts: Facts) -> None:
            super().__init__([Answer("Cardiomegaly", "big heart")])
            self.f = facts

        def facts(self, q: Query, answer: Answer) -> Facts | None:
            return self.f

    machine = Scripted([Answer("Pneumonia", "consolidation")])
    step(engine, sid, {Sender.MACHINE: machine, Sender.HUMAN: machine})
    with pytest.raises(TagRefused, match="after message 3"):
        step(engine, sid, {Sender.MACHINE: machine, Sender.HUMAN: Browser(Facts(False, False, False, Tag.REJECT))})
    with DB(engine) as db:
        assert len(session_msgs(db, session_id=sid)) == 1  # nothing written
    r = step(engine, sid, {Sender.MACHINE: machine, Sender.HUMAN: Browser(Facts(False, False, False, Tag.REFUTE))})
    assert r.message.tag is Tag.REFUTE and r.message.match is False


def test_format_failure_aborts_and_api_error_leaves_the_session_resumable(engine: Engine) -> None:
    sid = new_session(engine)

    class Broken(Scripted):
        def __init__(self, exc: Exception) -> None:
            super().__init__([])
            self.exc = exc

        def ask(self, q: Query) -> Answer:
            q.calls.append(CallRecord(provider="test", model="x", purpose="ask", error=str(self.exc)))
            raise self.exc

    down = Broken(AgentUnavailable("the LLM service answered 503"))
    with pytest.raises(AgentUnavailable):
        step(engine, sid, {Sender.MACHINE: down, Sender.HUMAN: HumanProxy()})
    assert status(engine, sid)[0] == "open"
    with DB(engine) as db:
        assert session_msgs(db, session_id=sid) == []
        errors = db.exec(select(LLMCall).where(LLMCall.session_id == sid)).all()
        assert [e.error for e in errors] == ["the LLM service answered 503"]
    garbage = Broken(FormatFailure("no Prediction: line after 5 attempts"))
    r = step(engine, sid, {Sender.MACHINE: garbage, Sender.HUMAN: HumanProxy()})
    assert r.aborted and status(engine, sid) == ("aborted", None, "no Prediction: line after 5 attempts")
    with pytest.raises(SessionClosed, match="aborted"):
        step(engine, sid, {Sender.MACHINE: garbage, Sender.HUMAN: HumanProxy()})


def test_two_threads_racing_on_one_session_write_once(any_engine: Engine) -> None:
    """Both threads read the same state and ask; the unique (session_id, j) key lets one win."""
    sid = new_session(any_engine)
    barrier = threading.Barrier(2)

    class Slow(Scripted):
        def ask(self, q: Query) -> Answer:
            barrier.wait(timeout=10)  # both have loaded the session before either inserts
            return super().ask(q)

    outcomes: list[str] = []

    def worker() -> None:
        agent = Slow([Answer("Pneumonia", "consolidation")])
        try:
            step(any_engine, sid, {Sender.MACHINE: agent, Sender.HUMAN: agent})
            outcomes.append("stored")
        except StepConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["conflict", "stored"]
    with DB(any_engine) as db:
        assert [m.j for m in session_msgs(db, session_id=sid)] == [1]
        assert len(db.exec(select(Context).where(Context.session_id == sid)).all()) == 1
        # the loser's call is still accounted for
        assert len(db.exec(select(LLMCall).where(LLMCall.session_id == sid)).all()) == 2
