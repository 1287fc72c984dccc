"""A hypothesis state machine over random guard outcomes, driven through the real engine.

Every generated session must conform to DESIGN §1, end by n, carry tags that agree
with its stored match/agree/changed facts, and repeat an unchanged answer verbatim.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sqlmodel import Session as DB

from pxp.agents.base import AgentBase, Answer, Query
from pxp.protocols.pxp.rules import Sender, Tag, agent_tag, conformance, stop_reason
from pxp.running.pxp.engine import step
from pxp.storage.store import db_session, make_engine, session_msgs, upgrade
from pxp.storage.tables import Experiment, Run, Session
from tests.factories import make_rad

_tmp = tempfile.TemporaryDirectory()
ENGINE = make_engine(f"sqlite:///{Path(_tmp.name) / 'machine.db'}")
upgrade(ENGINE)
DATASET = make_rad(ENGINE, name="machine", per_label=1)
COUNTER = itertools.count()


class Chooser(AgentBase):
    """Answers with whatever the state machine drew for this step."""

    label = "chooser"

    def __init__(self) -> None:
        self.next = Answer("A", "x")

    def ask(self, q: Query) -> Answer:
        return self.next

    # case-insensitive, so an answer can differ in text yet be unchanged (carried verbatim)
    def match(self, y1: str, y2: str, q: Query) -> bool:
        return y1.casefold() == y2.casefold()

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        return e1.casefold() == e2.casefold()


class ProtocolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.agent = Chooser()
        self.sid = 0
        self.n = self.k = 0

    @initialize(n=st.integers(1, 10), data=st.data())
    def open_session(self, n: int, data: st.DataObject) -> None:
        self._open(n, data)

    @precondition(lambda self: self.sid and self._status() != "open")
    @rule(n=st.integers(1, 10), data=st.data())
    def next_session(self, n: int, data: st.DataObject) -> None:
        self._open(n, data)

    def _open(self, n: int, data: st.DataObject) -> None:
        self.n = n
        self.k = data.draw(st.integers(1, max(1, n)))
        with db_session(ENGINE) as db:
            exp = Experiment(name=f"m{next(COUNTER)}", task="rad")
            db.add(exp)
            db.flush()
            run = Run(experiment_id=exp.id or 0)
            db.add(run)
            db.flush()
            s = Session(run_id=run.id or 0, instance_id=1, ordinal=1, n=self.n, k=self.k)
            db.add(s)
            db.flush()
            self.sid = s.id or 0

    def _status(self) -> str:
        with DB(ENGINE) as db:
            s = db.get(Session, self.sid)
            assert s is not None
            return s.status

    @precondition(lambda self: self.sid and self._status() == "open")
    @rule(y=st.sampled_from(["A", "a", "B", "C"]), e=st.sampled_from(["x", "X", "y"]))
    def take_step(self, y: str, e: str) -> None:
        self.agent.next = Answer(y, e)
        step(ENGINE, self.sid, {Sender.MACHINE: self.agent, Sender.HUMAN: self.agent})

    @invariant()
    def conforms(self) -> None:
        if not self.sid:
            return
        status = self._status()
        with DB(ENGINE) as db:
            msgs = session_msgs(db, session_id=self.sid)
        assert conformance(msgs, self.n, self.k, status=status) == []
        assert len(msgs) <= self.n
        for m in msgs[1:]:
            assert m.match is not None and m.agree is not None and m.changed is not None
            assert agent_tag(m.j, self.k, m.match, m.agree, m.changed) is m.tag
            assert m.tag is not Tag.INIT
            if m.j > 2 and not m.changed:  # an unchanged answer is the sender's message j-2, verbatim
                own = msgs[m.j - 3]
                assert (m.prediction, m.explanation) == (own.prediction, own.explanation)
        if status == "finished":
            assert stop_reason(msgs, self.n) is not None
        else:
            assert stop_reason(msgs, self.n) is None


ProtocolMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProtocolMachine = ProtocolMachine.TestCase
