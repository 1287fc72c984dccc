"""Controlled experiments: INTERACT(X, n, k) over R repetitions (the follow-up paper's Method).

An experiment stores its full config; each repetition is a Run whose sessions are
created up front in the recorded instance order, so a run can be resumed from the
database alone. Sessions inside a repetition are sequential (context carries over).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import select

from pxp import __version__
from pxp.agents.base import Agent, CarriedSession
from pxp.engine import instance_view, interact_session
from pxp.models import Experiment, Run, Session, utcnow
from pxp.protocol import Sender
from pxp.store import (
    dataset_instances,
    db_session,
    experiment_runs,
    find_dataset,
    run_sessions,
    session_msgs,
)


class RunError(RuntimeError):
    """A controlled run that cannot start (unknown dataset, bad config)."""


@dataclass
class RunConfig:
    """The full configuration stored with an experiment (enough to repeat it exactly)."""

    dataset: str
    split: str | None = None
    machine: str = "simulated"
    human: str = "proxy"
    checker: str = "lexical"
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    checker_temperature: float = 0.0
    checker_max_tokens: int = 10
    concurrency: int = 4
    eval_at_start: bool = False
    reps: int = 1
    n: int = 10
    k: int = 3
    seed: int = 0
    shuffle: bool = False
    learn: bool = False
    simulated: dict[str, float] = field(default_factory=dict)
    agree_threshold: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "machine": self.machine,
            "human": self.human,
            "checker": self.checker,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "checker_temperature": self.checker_temperature,
            "checker_max_tokens": self.checker_max_tokens,
            "concurrency": self.concurrency,
            "eval_at_start": self.eval_at_start,
            "reps": self.reps,
            "n": self.n,
            "k": self.k,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "learn": self.learn,
            "simulated": dict(self.simulated),
            "agree_threshold": self.agree_threshold,
            "extra": dict(self.extra),
            "pxp_version": __version__,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in keys})


def rep_seed(seed: int, repetition: int) -> int:
    """The seed of repetition r, derived from the experiment seed."""
    digest = hashlib.sha256(f"pxp|{seed}|{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def unique_name(engine: Engine, base: str) -> str:
    with db_session(engine) as db:
        taken = set(db.exec(select(Experiment.name).where(Experiment.name.startswith(base))).all())  # type: ignore[attr-defined]
    if base not in taken:
        return base
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def create_experiment(engine: Engine, cfg: RunConfig, *, name: str | None = None) -> Experiment:
    """Store the experiment, its R runs, and every run's sessions in instance order."""
    if cfg.n < 1 or cfg.k < 1:
        raise RunError("n and k must be at least 1")
    if cfg.reps < 1:
        raise RunError("--reps must be at least 1")
    name = name or unique_name(engine, f"{cfg.dataset}-{cfg.machine.split(':')[0]}-s{cfg.seed}")
    with db_session(engine) as db:
        ds = find_dataset(db, name=cfg.dataset)
        if ds is None:
            raise RunError(f"no dataset named {cfg.dataset!r}; import one or run `pxp demo`")
        if db.exec(select(Experiment).where(Experiment.name == name)).first() is not None:
            raise RunError(f"an experiment named {name!r} already exists")
        instances = dataset_instances(db, dataset_id=ds.id or 0, split=cfg.split)
        if not instances:
            where = f" in split {cfg.split!r}" if cfg.split else ""
            raise RunError(f"dataset {cfg.dataset!r} has no instances{where}")
        exp = Experiment(
            name=name, task=ds.task, mode="controlled", status="created", n=cfg.n, k=cfg.k,
            config=cfg.as_dict(),
        )
        db.add(exp)
        db.flush()
        for r in range(1, cfg.reps + 1):
            order = [i.id for i in instances if i.id is not None]
            if cfg.shuffle:
                random.Random(rep_seed(cfg.seed, r)).shuffle(order)
            run = Run(
                experiment_id=exp.id or 0, repetition=r, seed=rep_seed(cfg.seed, r),
                instance_order=order,
            )
            db.add(run)
            db.flush()
            for ordinal, iid in enumerate(order, start=1):
                db.add(Session(run_id=run.id or 0, instance_id=iid, ordinal=ordinal,
                               n=cfg.n, k=cfg.k))
    return exp


AgentFactory = Callable[[Engine, Experiment, Run], Mapping[Sender, Agent]]


def default_agents(engine: Engine, exp: Experiment, run: Run) -> Mapping[Sender, Agent]:
    """The agents the experiment's config names (pxp.agents.factory)."""
    from pxp.agents.factory import make_agents

    return make_agents(engine, exp, run)


def carried(engine: Engine, run_id: int, before_ordinal: int) -> list[CarriedSession]:
    """The kept sessions of a run before `before_ordinal` (LEARN state, from the database)."""
    out = []
    with db_session(engine) as db:
        for s in run_sessions(db, run_id=run_id):
            if s.ordinal >= before_ordinal:
                break
            if s.context_kept and s.id is not None:
                msgs = tuple(session_msgs(db, session_id=s.id))
                out.append(CarriedSession(s.id, instance_view(engine, s.instance_id, db), msgs))
    return out


def run_repetition(engine: Engine, exp: Experiment, run: Run, agents: Mapping[Sender, Agent]) -> None:
    """INTERACT over the run's sessions in order, carrying context across sessions."""
    with db_session(engine) as db:
        sessions = run_sessions(db, run_id=run.id or 0)
    carry: list[CarriedSession] = []
    _set_run_status(engine, run.id or 0, "running")
    for s in sessions:
        assert s.id is not None
        if s.status == "open":
            interact_session(engine, s.id, agents, carry=carry)
        with db_session(engine) as db:
            row = db.get(Session, s.id)
            assert row is not None
            if row.context_kept is None:
                row.context_kept = row.status == "finished"
                row.learn_note = "kept (no LEARN in this run)" if row.context_kept else "aborted"
                db.add(row)
            kept = row.context_kept
            msgs = tuple(session_msgs(db, session_id=s.id))
        if kept:
            carry.append(CarriedSession(s.id, instance_view(engine, s.instance_id), msgs))
    _set_run_status(engine, run.id or 0, "finished")


def _set_run_status(engine: Engine, run_id: int, status: str) -> None:
    with db_session(engine) as db:
        run = db.get(Run, run_id)
        if run is not None:
            run.status = status
            run.updated_at = utcnow()
            db.add(run)


def run_experiment(
    engine: Engine, experiment_id: int, *, agent_factory: AgentFactory = default_agents
) -> None:
    """Run (or resume) every repetition of an experiment to the end."""
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise RunError(f"experiment {experiment_id} does not exist")
        exp.status = "running"
        db.add(exp)
        runs = experiment_runs(db, experiment_id=experiment_id)
    for run in runs:
        run_repetition(engine, exp, run, agent_factory(engine, exp, run))
    with db_session(engine) as db:
        row = db.get(Experiment, experiment_id)
        assert row is not None
        row.status = "finished"
        db.add(row)
