"""Controlled runs: LEARN, machine performance, concurrent repetitions, determinism."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.agents.proxy import HumanProxy
from pxp.agents.simulated import SimulatedConfig, SimulatedMachine
from pxp.analysis.report import report_json
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.controlled.learn import carried
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.engine import instance_view
from pxp.running.pxp.evaluate import Score, evaluate, performance_series
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import dataset_instances, find_dataset
from pxp.storage.tables import Evaluation, Experiment, Instance, LLMCall, Message, Run, Session
from tests.factories import make_drug, make_rad

# a machine that is often wrong, rarely adopts corrections, and is misled by unratified sessions
HARSH = {"accuracy": 0.4, "adopt": 0.2, "mislead": 0.3}


def _cfg(**kw: Any) -> RunConfig:
    base: dict[str, Any] = {
        "dataset": "toy-rad", "split": "train", "reps": 3, "seed": 2, "learn": True, "eval_at_start": True,
        "simulated": dict(HARSH),
    }
    base.update(kw)
    return RunConfig(**base)


def _run(engine: Engine, cfg: RunConfig, name: str, **kw: Any) -> Experiment:
    exp = create_experiment(engine, cfg, name=name)
    out = run_experiment(engine, exp.id or 0, **kw)
    assert out.status == "finished", out
    return exp


def m_table(engine: Engine, exp: Experiment) -> list[tuple[Any, ...]]:
    """The M table of an experiment without ids or timestamps, in (repetition, ordinal, j) order."""
    with DB(engine) as db:
        rows = db.exec(
            select(Run.repetition, Session.ordinal, Message.j, Message.sender, Message.tag, Message.prediction,
                   Message.explanation, Message.match, Message.agree, Message.changed)
            .join(Session, col(Session.id) == col(Message.session_id))
            .join(Run, col(Run.id) == col(Session.run_id))
            .where(Run.experiment_id == exp.id)
            .order_by(col(Run.repetition), col(Session.ordinal), col(Message.j))
        ).all()
    return [tuple(r) for r in rows]


def d_table(engine: Engine, exp: Experiment) -> list[tuple[Any, ...]]:
    with DB(engine) as db:
        rows = db.exec(
            select(Run.repetition, Session.ordinal, Session.instance_id, Session.status, Session.stop_reason,
                   Session.context_kept, Session.learn_note, Session.learn_val_before, Session.learn_val_after)
            .join(Run, col(Run.id) == col(Session.run_id))
            .where(Run.experiment_id == exp.id)
            .order_by(col(Run.repetition), col(Session.ordinal))
        ).all()
    return [tuple(r) for r in rows]


def e_table(engine: Engine, exp: Experiment) -> list[tuple[Any, ...]]:
    with DB(engine) as db:
        rows = db.exec(
            select(Run.repetition, Evaluation.after_session, Evaluation.split, Evaluation.prediction_accuracy,
                   Evaluation.explanation_accuracy, Evaluation.both_accuracy, Evaluation.instances)
            .join(Run, col(Run.id) == col(Evaluation.run_id))
            .where(Run.experiment_id == exp.id)
            .order_by(col(Run.repetition), col(Evaluation.after_session), col(Evaluation.split))
        ).all()
    return [tuple(r) for r in rows]


def _report(engine: Engine, exp: Experiment) -> dict[str, Any]:
    rep = report_json(engine, exp.name)
    rep.pop("experiment")
    rep.pop("performance", None)
    return rep


@pytest.fixture
def rad(engine: Engine) -> Engine:
    make_rad(engine, per_label=4)  # 20 instances: 6 train, 7 val, 7 test
    return engine


def test_identical_reports_across_runs_and_concurrency(rad: Engine) -> None:
    a = _run(rad, _cfg(concurrency=1), "a", concurrency=1)
    b = _run(rad, _cfg(concurrency=8), "b", concurrency=8)
    c = _run(rad, _cfg(concurrency=3), "c")
    assert _report(rad, a) == _report(rad, b) == _report(rad, c)
    assert m_table(rad, a) == m_table(rad, b) == m_table(rad, c)
    assert d_table(rad, a)[0][2:] == d_table(rad, b)[0][2:]
    assert [r[2:] for r in d_table(rad, a)] == [r[2:] for r in d_table(rad, c)]
    assert e_table(rad, a) == e_table(rad, b) == e_table(rad, c)
    assert performance_series(rad, a.id or 0) == performance_series(rad, b.id or 0)
    # and another seed really gives other results (the comparison above could fail)
    d = _run(rad, _cfg(seed=3), "d")
    assert m_table(rad, d) != m_table(rad, a)


def test_learn_keeps_context_only_when_validation_accuracy_holds(rad: Engine) -> None:
    exp = _run(rad, _cfg(), "learn")
    rows = d_table(rad, exp)
    kept = [r for r in rows if r[5]]
    dropped = [r for r in rows if r[5] is False]
    assert kept and dropped, "this seed should exercise both outcomes"
    assert all(r[5] is not None for r in rows)
    for r in rows:
        before, after = r[7], r[8]
        assert before is not None and after is not None
        assert r[5] == (after >= before)  # ties keep
        assert ("kept" if r[5] else "dropped") in r[6]
    # the decisions chain: a session's "before" is the validation score after the last kept one
    evals = {(e[0], e[1], e[2]): e for e in e_table(rad, exp)}
    for rep in (1, 2, 3):
        last = 0
        for r in [r for r in rows if r[0] == rep]:
            assert evals[(rep, last, "val")][5] == pytest.approx(r[7])
            if r[5]:
                assert evals[(rep, r[1], "val")][5] == pytest.approx(r[8])
                last = r[1]


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 11])
def test_evaluations_after_kept_sessions_only(rad: Engine, seed: int) -> None:
    exp = _run(rad, _cfg(seed=seed), "evals")
    rows = d_table(rad, exp)
    for rep in (1, 2, 3):
        kept = {r[1] for r in rows if r[0] == rep and r[5]}
        test_points = {e[1] for e in e_table(rad, exp) if e[0] == rep and e[2] == "test"}
        val_points = {e[1] for e in e_table(rad, exp) if e[0] == rep and e[2] == "val"}
        assert test_points == {0} | kept
        assert val_points == {0} | kept
    assert all(e[6] == 7 for e in e_table(rad, exp))
    assert all(r[5] == (r[8] >= r[7]) for r in rows), "kept exactly when validation accuracy did not drop"
    with DB(rad) as db:
        purposes = set(db.exec(select(LLMCall.purpose).where(LLMCall.experiment_id == exp.id)).all())
    assert purposes == {"ask", "eval"}


def test_stored_scores_match_an_independent_evaluation_with_the_rebuilt_context(rad: Engine) -> None:
    """The test score after session i equals evaluating the machine with the kept sessions up to i."""
    exp = _run(rad, _cfg(reps=1), "indep")
    with DB(rad) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
        ds = find_dataset(db, name="toy-rad")
        assert ds is not None and ds.id is not None
        test = [instance_view(rad, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id, split="test")]
        pool = [instance_view(rad, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id)]
        sessions = db.exec(select(Session).where(Session.run_id == run.id).order_by(col(Session.ordinal))).all()
        stored = {e.after_session: Score.of(e)
                  for e in db.exec(select(Evaluation).where(Evaluation.run_id == run.id, Evaluation.split == "test"))}
    machine = SimulatedMachine(pool, SimulatedConfig(seed=run.seed, **HARSH))
    human = HumanProxy()
    assert stored[0] == evaluate(machine, human, test, [])
    for s in sessions:
        if s.context_kept:
            carry = carried(rad, run.id or 0, s.ordinal + 1)
            assert stored[s.ordinal] == evaluate(machine, human, test, carry, workers=4)


def test_no_learn_keeps_every_context_and_evaluates_after_every_session(rad: Engine) -> None:
    exp = _run(rad, _cfg(learn=False, eval_at_start=False, reps=2), "nolearn")
    rows = d_table(rad, exp)
    assert all(r[5] is True and "LEARN is off" in r[6] for r in rows)
    assert all(r[7] is None for r in rows)
    points = [(e[0], e[1], e[2]) for e in e_table(rad, exp)]
    assert points == [(rep, o, "test") for rep in (1, 2) for o in range(1, 7)]


def test_empty_validation_and_test_splits_are_noted_and_fall_back(engine: Engine) -> None:
    make_drug(engine)  # every instance is in train
    exp = _run(engine, RunConfig(dataset="toy-drug", split="train", learn=True, reps=2), "drug")
    notes = exp.config["resolved"]["notes"]
    assert any("validation split 'val'" in n and "every session's context is kept" in n for n in notes)
    assert any("test split 'test'" in n for n in notes)
    assert exp.config["resolved"]["val"] == {"split": "val", "instances": 0, "used": False}
    rows = d_table(engine, exp)
    assert len(rows) == 6 and all(r[5] is True and "no validation instances" in r[6] for r in rows)
    assert e_table(engine, exp) == []


def test_full_config_is_stored(rad: Engine) -> None:
    exp = create_experiment(rad, _cfg(shuffle=True, concurrency=5), name="cfg")
    c = exp.config
    for key in ("dataset", "split", "val_split", "test_split", "n", "k", "seed", "learn", "learn_metric",
                "concurrency", "machine", "checker", "simulated", "pxp_version", "roles", "task", "prompts"):
        assert key in c, key
    assert c["roles"]["generator"]["simulated"] == HARSH
    assert c["task"] == "rad" and c["concurrency"] == 5
    assert RunConfig.from_dict(c) == _cfg(shuffle=True, concurrency=5)
    with DB(rad) as db:
        orders = [r.instance_order for r in db.exec(select(Run).where(Run.experiment_id == exp.id))]
    assert len({tuple(o) for o in orders}) > 1, "shuffled orders differ per repetition"
    assert all(sorted(o) == sorted(orders[0]) for o in orders)


def test_bad_config_is_refused(rad: Engine) -> None:
    with pytest.raises(RunError, match="learn_metric"):
        create_experiment(rad, _cfg(learn_metric="f1"))
    with pytest.raises(RunError, match="no instances in split 'nope'"):
        create_experiment(rad, _cfg(split="nope"))
    with pytest.raises(RunError, match="concurrency"):
        create_experiment(rad, _cfg(concurrency=0))


def test_repetitions_run_at_the_same_time(rad: Engine) -> None:
    """Each repetition's messages interleave with the others' (threads, not one after another)."""
    exp = _run(rad, _cfg(reps=3, learn=False, simulated={**HARSH, "latency": 0.01}, concurrency=8), "conc")
    with DB(rad) as db:
        spans = []
        for run in db.exec(select(Run).where(Run.experiment_id == exp.id)):
            times = db.exec(
                select(Message.created_at).join(Session, col(Session.id) == col(Message.session_id))
                .where(Session.run_id == run.id)
            ).all()
            spans.append((min(times), max(times)))
    for a in spans:
        for b in spans:
            assert a[0] < b[1] and b[0] < a[1], "repetition time spans overlap"


@pytest.mark.postgres
def test_concurrent_run_on_postgresql_matches_sqlite(engine: Engine, pg_engine: Engine) -> None:
    for e in (engine, pg_engine):
        make_rad(e, per_label=4)
    a = _run(engine, _cfg(reps=3), "lite")
    b = _run(pg_engine, _cfg(reps=3), "pg", concurrency=6)
    assert m_table(engine, a) == m_table(pg_engine, b)
    assert e_table(engine, a) == e_table(pg_engine, b)
    assert [r[3:] for r in d_table(engine, a)] == [r[3:] for r in d_table(pg_engine, b)]


class _Recorder:
    """An observer keeping what the runner reports."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, int, str]] = []
        self.done: list[tuple[int, str]] = []

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
        pass

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        self.messages.append((ordinal, j, tag))

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        self.done.append((ordinal, status))

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        pass


def test_an_aborted_step_is_not_reported_as_a_message(rad: Engine) -> None:
    """A format failure stores no message: the observer (the progress display) hears of the
    session's end, not of a message j that does not exist."""
    from pxp.agents.base import FormatFailure, Query
    from pxp.protocols.pxp.rules import Sender
    from pxp.running.pxp.factory import make_agents

    class Failing(SimulatedMachine):
        def ask(self, q: Query) -> Any:
            if q.session_id is not None and q.j == 3 and q.instance.id == second:
                raise FormatFailure("no usable answer in 5 attempts")
            return super().ask(q)

    def agents(engine: Engine, exp: Experiment, run: Run) -> dict[Sender, Any]:
        made = make_agents(engine, exp, run)
        sim = made[Sender.MACHINE]
        assert isinstance(sim, SimulatedMachine)
        return {**made, Sender.MACHINE: Failing(sim.pool, sim.config)}

    exp = create_experiment(rad, _cfg(reps=1, learn=False, simulated={"accuracy": 0.0, "adopt": 0.0}), name="ab")
    with DB(rad) as db:
        second = db.exec(select(Session.instance_id).where(Session.ordinal == 2)).one()
    obs = _Recorder()
    assert run_experiment(rad, exp.id or 0, agent_factory=agents, observer=obs).status == "finished"
    assert (2, "aborted") in obs.done
    with DB(rad) as db:
        stored = {(s.ordinal, m.j, m.tag) for m, s in db.exec(
            select(Message, Session).join(Session, col(Session.id) == col(Message.session_id))).all()}
    assert set(obs.messages) == stored  # every reported message is a stored one, and the other way round
    assert (2, 3, "INIT") not in obs.messages


def test_the_database_proxy_never_sends_revise(rad: Engine) -> None:
    """Its answer never changes (DESIGN §1): every human message carries the reference answer,
    with changed false, so REVISE never appears from the human, on RAD and DRUG."""
    make_drug(rad, "toy-drug")
    seen: set[tuple[str, str]] = set()
    for ds in ("toy-rad", "toy-drug"):
        cfg = _cfg(dataset=ds, split=None, reps=2, learn=False, n=10, k=2,
                   simulated={"accuracy": 0.2, "adopt": 0.5})
        exp = _run(rad, cfg, f"proxy-{ds}")
        with DB(rad) as db:
            rows = db.exec(
                select(Message.sender, Message.tag, Message.changed, Message.prediction, Message.explanation,
                       Session.instance_id)
                .join(Session, col(Session.id) == col(Message.session_id))
                .join(Run, col(Run.id) == col(Session.run_id)).where(Run.experiment_id == exp.id)
            ).all()
            refs = {i.id: (i.reference_prediction, i.reference_explanation) for i in db.exec(select(Instance))}
        seen |= {(s, t) for s, t, *_ in rows}
        human = [r for r in rows if r[0] == "human"]
        assert human and all(r[1] != "REVISE" and r[2] is False for r in human)
        assert all((r[3], r[4]) == refs[r[5]] for r in human)
    assert ("machine", "REVISE") in seen, "the machine does revise, so the runs exercise REVISE"


def test_learn_evaluations_carry_the_validation_splits_own_name(engine: Engine) -> None:
    make_rad(engine, per_label=4)
    with DB(engine) as db:
        for inst in db.exec(select(Instance).where(Instance.split == "val")).all():
            inst.split = "dev"
            db.add(inst)
        db.commit()
    exp = _run(engine, _cfg(reps=1, val_split="dev"), "dev-split")
    with DB(engine) as db:
        splits = {
            e.split
            for e in db.exec(
                select(Evaluation).join(Run, col(Run.id) == col(Evaluation.run_id)).where(Run.experiment_id == exp.id)
            ).all()
        }
        decided = db.exec(
            select(Session).join(Run, col(Run.id) == col(Session.run_id)).where(Run.experiment_id == exp.id)
        ).all()
    assert splits == {"dev", "test"}
    assert any(s.learn_val_before is not None for s in decided)


def test_a_cancel_before_the_run_starts_is_not_overwritten(engine: Engine) -> None:
    """The app's Cancel may land between a worker's claim and the runner's start: it stands."""
    from pxp.running.pxp.controlled.repetition import NullObserver

    make_rad(engine, per_label=2)
    exp = create_experiment(engine, _cfg(reps=1, eval_at_start=False), name="cancel-first")
    with DB(engine) as db:
        row = db.get(Experiment, exp.id)
        assert row is not None
        row.status = "cancelled"
        db.add(row)
        db.commit()
    seen: list[str] = []

    class Watch(NullObserver):
        def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
            with DB(engine) as db:
                e = db.get(Experiment, exp.id)
                seen.append(e.status if e is not None else "")

    run_experiment(engine, exp.id or 0, observer=Watch())
    assert seen == ["cancelled"]  # the runner did not mark it running over the cancel
