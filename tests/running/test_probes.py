"""The common-ground probe inside controlled runs (docs/research.md, Common-ground probe): stored apart, never
changing the session."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.pxp.common_ground import truths
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.probes import probe_session
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.factory import make_agents
from pxp.storage.tables import Context, Experiment, LLMCall, Message, Probe, Run, Session
from tests.factories import make_rad
from tests.running.test_runner import m_table

SIM = {"accuracy": 0.4, "adopt": 0.5}


def _run(engine: Engine, name: str, **kw: Any) -> Experiment:
    cfg = RunConfig(dataset="toy-rad", split="train", reps=2, seed=3, learn=True, simulated=dict(SIM), **kw)
    exp = create_experiment(engine, cfg, name=name)
    assert run_experiment(engine, exp.id or 0).status == "finished"
    return exp


def _probes(engine: Engine, exp: Experiment) -> list[Probe]:
    with DB(engine) as db:
        return list(db.exec(
            select(Probe).join(Session, col(Session.id) == col(Probe.session_id))
            .join(Run, col(Run.id) == col(Session.run_id)).where(Run.experiment_id == exp.id)
            .order_by(col(Probe.session_id), col(Probe.j), col(Probe.question))
        ).all())


def _contexts(engine: Engine, exp: Experiment) -> list[tuple[int, int, int]]:
    with DB(engine) as db:
        rows = db.exec(
            select(Run.repetition, Session.ordinal, Context.j)
            .join(Session, col(Session.id) == col(Context.session_id))
            .join(Run, col(Run.id) == col(Session.run_id)).where(Run.experiment_id == exp.id)
            .order_by(col(Run.repetition), col(Session.ordinal), col(Context.j))
        ).all()
    return [tuple(r) for r in rows]


def test_a_probed_run_stores_probes_and_the_same_messages(any_engine: Engine) -> None:
    engine = any_engine
    make_rad(engine, per_label=4)
    plain = _run(engine, "plain")
    probed = _run(engine, "probed", probe=True)
    assert m_table(engine, probed) == m_table(engine, plain)  # the session goes exactly as without probes
    assert _contexts(engine, probed) == _contexts(engine, plain)
    assert _probes(engine, plain) == []
    probes = _probes(engine, probed)
    assert probes
    with DB(engine) as db:
        sessions = db.exec(select(Session).join(Run, col(Run.id) == col(Session.run_id))
                           .where(Run.experiment_id == probed.id)).all()
        for s in sessions:
            msgs = [Msg(m.j, Sender(m.sender), Tag(m.tag), m.prediction, m.explanation, m.match, m.agree,
                        m.changed)
                    for m in db.exec(select(Message).where(Message.session_id == s.id).order_by(col(Message.j)))]
            want = {(j, key, t) for m in msgs if m.sender is Sender.HUMAN
                    for key, t in truths(msgs, m.j).items() for j in [m.j]}
            got = {(p.j, p.question, p.truth) for p in probes if p.session_id == s.id}
            assert got == want, s.id  # one probe per question after every human message, truth from the store
        calls = db.exec(select(LLMCall).where(LLMCall.experiment_id == probed.id, LLMCall.purpose == "probe")).all()
    assert len(calls) == len(probes)  # every probe is an accounted call
    assert all(p.valid and p.answer is not None for p in probes)
    correct = sum(p.answer is p.truth for p in probes) / len(probes)
    assert 0.6 < correct < 0.97  # default simulated probe accuracy 0.8


def test_simulated_probe_accuracy_is_settable(engine: Engine) -> None:
    make_rad(engine, per_label=4)
    perfect = _run(engine, "perfect", probe=True)
    with DB(engine) as db:
        exp = db.get(Experiment, perfect.id)
        assert exp is not None and exp.config["probe"] is True
    sim = {**SIM, "probe_accuracy": 1.0}
    cfg = RunConfig(dataset="toy-rad", split="train", reps=1, seed=3, simulated=sim, probe=True)
    exp2 = create_experiment(engine, cfg, name="always-right")
    assert run_experiment(engine, exp2.id or 0).status == "finished"
    probes = _probes(engine, exp2)
    assert probes and all(p.answer is p.truth for p in probes)
    sim0 = {**SIM, "probe_accuracy": 0.0}
    exp3 = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=1, seed=3, simulated=sim0,
                                               probe=True), name="always-wrong")
    assert run_experiment(engine, exp3.id or 0).status == "finished"
    assert all(p.answer is not p.truth for p in _probes(engine, exp3))


def test_probe_session_catches_up_on_unprobed_human_messages(engine: Engine) -> None:
    """A resumed run (or a probe lost to an API error) is probed at the next human message: only what is missing."""
    make_rad(engine, per_label=4)
    exp = _run(engine, "probed", probe=True)
    before = [(p.session_id, p.j, p.question, p.truth, p.answer) for p in _probes(engine, exp)]
    sid, j = before[0][0], before[0][1]
    with DB(engine) as db:
        for p in db.exec(select(Probe).where(Probe.session_id == sid, Probe.j == j)).all():
            db.delete(p)
        db.commit()
        run = db.exec(select(Run).where(Run.experiment_id == exp.id, Run.repetition == 1)).one()
        n_calls = len(db.exec(select(LLMCall).where(LLMCall.purpose == "probe")).all())
    machine = make_agents(engine, exp, run)[Sender.MACHINE]
    again = probe_session(engine, sid, machine)
    assert {(p.j, p.question) for p in again} == {(b[1], b[2]) for b in before if b[0] == sid and b[1] == j}
    assert probe_session(engine, sid, machine) == []  # nothing left to probe
    after = [(p.session_id, p.j, p.question, p.truth, p.answer) for p in _probes(engine, exp)]
    assert after == before  # the same answers: the simulated probe is keyed by (seed, instance, j, question)
    with DB(engine) as db:
        assert len(db.exec(select(LLMCall).where(LLMCall.purpose == "probe")).all()) == n_calls + len(again)


def test_a_machine_without_a_probe_path_is_refused_in_one_line(engine: Engine) -> None:
    from pxp.agents.proxy import HumanProxy
    from pxp.running.pxp.controlled.probes import ProbeError, hook

    agents: dict[Sender, Any] = {Sender.MACHINE: HumanProxy(), Sender.HUMAN: HumanProxy()}
    assert hook(engine, False, 1, agents, print) is print  # disabled: the reporter unchanged
    with pytest.raises(ProbeError, match=r"^machine proxy cannot answer probes; run without --probe$"):
        hook(engine, True, 1, agents, print)
