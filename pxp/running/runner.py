"""Controlled experiments: INTERACT(X, n, k) over R repetitions (the follow-up paper's Method).

An experiment stores its full config; each repetition is a Run whose sessions are
created up front in the recorded instance order, so a run can be resumed from the
database alone. Sessions inside a repetition are sequential (the machine carries the
context of earlier sessions); the R repetitions run at the same time in threads, and
every LLM call holds one slot of the shared limit (pxp.limits).

LEARN (DESIGN §1): after each session its context is kept only if the machine's
validation accuracy with it does not drop (ties keep it); `learn=False` always keeps.
The decision, both validation accuracies and a note are stored on the Session, so
LEARN state is rebuilt from the database on resume. Machine performance on the test
split is stored as Evaluation rows at the start (optional) and after every kept session.

A transient failure (AgentUnavailable) pauses the repetition; resuming retries the
step that failed. Nothing stored is ever repeated: messages are keyed (session, j),
decisions are written once, evaluations are keyed (run, after_session, split).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from pxp.agents.base import Agent, AgentUnavailable, CallRecord, CarriedSession, InstanceView
from pxp.llm.limits import call_limit, set_call_limit
from pxp.llm.redact import redact_any
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import Sender
from pxp.running import journal
from pxp.running.checks import check_config
from pxp.running.config import RunConfig, RunError, rep_seed
from pxp.running.engine import SessionClosed, StepConflict, call_rows, instance_view, record_calls, step
from pxp.running.evaluate import Score, evaluate
from pxp.storage.store import (
    dataset_instances,
    db_session,
    experiment_runs,
    find_dataset,
    find_experiment,
    run_sessions,
    session_msgs,
)
from pxp.storage.tables import Evaluation, Experiment, LLMCall, Run, Session, utcnow


def unique_name(engine: Engine, base: str) -> str:
    with db_session(engine) as db:
        taken = set(db.exec(select(Experiment.name).where(col(Experiment.name).startswith(base))).all())
    if base not in taken:
        return base
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def _prompt_templates(task: str, ds_config: Mapping[str, Any], labels: Sequence[str]) -> dict[str, Any]:
    """The prompts the LLM roles use for this dataset's task (stored with the config)."""
    try:
        from pxp.tasks.registry import task_spec

        spec = task_spec(task, ds_config, labels)
        return {
            "system": spec.system_prompt(),
            "instance": spec.instance,
            "instance_short": spec.instance_short,
            "checker": spec.checker_prompt(),
            "few_shot": len(spec.few_shot),
            "max_tokens": spec.max_tokens,
        }
    except Exception as e:  # a task config that cannot build prompts fails later, with its own message
        return {"error": f"{type(e).__name__}: {e}"}


def create_experiment(engine: Engine, cfg: RunConfig, *, name: str | None = None) -> Experiment:
    """Store the experiment, its R runs, and every run's sessions in instance order.

    The resolved splits (how many instances each holds, and what happens when one is
    empty) are stored with the config under "resolved".
    """
    check_config(cfg)
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
        n_val = len(dataset_instances(db, dataset_id=ds.id or 0, split=cfg.val_split)) if cfg.val_split else 0
        n_test = len(dataset_instances(db, dataset_id=ds.id or 0, split=cfg.test_split)) if cfg.test_split else 0
        notes = []
        if cfg.learn and n_val == 0:
            notes.append(
                f"no instances in validation split {cfg.val_split!r}: LEARN cannot check, "
                "every session's context is kept"
            )
        if n_test == 0:
            notes.append(f"no instances in test split {cfg.test_split!r}: machine performance is not evaluated")
        if cfg.split is None and (n_val or n_test):
            notes.append("the agents interact on every instance, including the validation and test splits")
        config = cfg.as_dict()
        config["task"] = ds.task
        labels = sorted({i.reference_prediction for i in dataset_instances(db, dataset_id=ds.id or 0)
                         if i.reference_prediction})
        config["prompts"] = _prompt_templates(ds.task, dict(ds.config or {}), labels)
        config["resolved"] = {
            "interact": {"split": cfg.split, "instances": len(instances)},
            "val": {"split": cfg.val_split, "instances": n_val, "used": bool(cfg.learn and n_val)},
            "test": {"split": cfg.test_split, "instances": n_test},
            "notes": notes,
        }
        exp = Experiment(name=name, task=ds.task, mode="controlled", status="created", n=cfg.n, k=cfg.k, config=config)
        db.add(exp)
        db.flush()
        for r in range(1, cfg.reps + 1):
            order = [i.id for i in instances if i.id is not None]
            if cfg.shuffle:
                random.Random(rep_seed(cfg.seed, r)).shuffle(order)
            run = Run(experiment_id=exp.id or 0, repetition=r, seed=rep_seed(cfg.seed, r), instance_order=order)
            db.add(run)
            db.flush()
            for ordinal, iid in enumerate(order, start=1):
                db.add(Session(run_id=run.id or 0, instance_id=iid, ordinal=ordinal, n=cfg.n, k=cfg.k))
    return exp


def experiment_notes(exp: Experiment) -> list[str]:
    """What create_experiment noted about the splits (empty splits, overlaps)."""
    return list((exp.config.get("resolved") or {}).get("notes") or [])


AgentFactory = Callable[[Engine, Experiment, Run], Mapping[Sender, Agent]]


def default_agents(engine: Engine, exp: Experiment, run: Run) -> Mapping[Sender, Agent]:
    """The agents the experiment's config names (pxp.running.factory)."""
    from pxp.running.factory import make_agents

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


# --- observing a run ----------------------------------------------------------------------


class Observer(Protocol):
    """What the runner reports as it goes (pxp.running.progress draws it). Called from worker threads."""

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None: ...

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None: ...

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None: ...

    def run_ended(self, rep: int, status: str, note: str | None) -> None: ...


class NullObserver:
    """Reports nothing."""

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
        pass

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        pass

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        pass

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        pass


class Interrupted(PxpError):
    """The user asked the run to stop (Ctrl-C); the repetition is paused, resumable."""


# --- one repetition ---------------------------------------------------------------------------


@dataclass
class _Rep:
    """What one repetition needs while it runs."""

    engine: Engine
    cfg: RunConfig
    exp: Experiment
    run: Run
    machine: Agent
    human: Agent
    val: list[InstanceView]
    test: list[InstanceView]
    evals: dict[tuple[int, str], Score]
    stop: threading.Event
    pool: ThreadPoolExecutor | None = None

    def score(
        self, instances: list[InstanceView], carry: Sequence[CarriedSession], session_id: int | None
    ) -> Scored:
        """The machine's score with context `carry`, and its calls to store with it.

        Each call is journaled when sent (pxp.running.journal), so a crash mid-evaluation leaves it
        counted as of unknown outcome. When an AgentUnavailable interrupts the evaluation its
        calls are stored at once.
        """
        calls: list[CallRecord] = []
        try:
            with journal.journaled(self.engine, experiment_id=self.exp.id, run_id=self.run.id,
                                   session_id=session_id, j=None):
                score = evaluate(
                    self.machine, self.human, instances, carry, n=self.cfg.n, k=self.cfg.k,
                    workers=call_limit(), record=calls.extend, executor=self.pool,
                )
        except AgentUnavailable:
            record_calls(self.engine, calls, experiment_id=self.exp.id, run_id=self.run.id, session_id=session_id)
            raise
        return score, calls

    def rows(self, calls: list[CallRecord], session_id: int | None) -> list[dict[str, Any]]:
        return call_rows(calls, experiment_id=self.exp.id, run_id=self.run.id, session_id=session_id, j=None)

    def store_eval(self, after: int, split: str, scored: Scored, session_id: int | None = None) -> Score:
        """Insert an Evaluation row with its calls, in one transaction; a row already there wins."""
        s, calls = scored
        try:
            with self.engine.begin() as conn:
                store_calls(conn, self.rows(calls, session_id), calls)
                conn.execute(insert(Evaluation).values(**_eval_values(self.run.id or 0, after, split, s)))
        except IntegrityError:
            with self.engine.begin() as conn:
                store_calls(conn, self.rows(calls, session_id), calls)
        self.evals.setdefault((after, split), s)
        return s


Scored = tuple[Score, list[CallRecord]]


def store_calls(conn: Any, rows: list[dict[str, Any]], calls: list[CallRecord]) -> None:
    """Insert the LLMCall rows and settle their journal entries, in the caller's transaction."""
    if rows:
        conn.execute(insert(LLMCall), rows)
        journal.settle(conn, calls)


def _eval_values(run_id: int, after: int, split: str, s: Score) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "after_session": after,
        "split": split,
        "prediction_accuracy": s.prediction,
        "explanation_accuracy": s.explanation,
        "both_accuracy": s.both,
        "instances": s.instances,
        "created_at": utcnow(),
    }


def _split_views(engine: Engine, dataset: str, split: str | None) -> list[InstanceView]:
    if split is None:
        return []
    with db_session(engine) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None or ds.id is None:
            raise RunError(f"no dataset named {dataset!r}")
        return [instance_view(engine, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id, split=split)]


def _learn(rep: _Rep, s: Session, carry: list[CarriedSession], this: CarriedSession | None, last_kept: int) -> bool:
    """LEARN after session s: keep its context iff validation accuracy does not drop."""
    cfg = rep.cfg
    val_split = cfg.val_split or "val"  # evaluations are stored under the split's own name
    before = after = None
    trial_calls: list[dict[str, Any]] = []
    trial_records: list[CallRecord] = []
    if s.status == "aborted" or this is None:
        kept, note = False, "dropped: the session was aborted"
    elif not cfg.learn:
        kept, note = True, "kept: LEARN is off (--no-learn)"
    elif not rep.val:
        kept, note = True, f"kept: no validation instances in split {cfg.val_split!r}, LEARN cannot check"
    else:
        metric = cfg.learn_metric
        base = rep.evals.get((last_kept, val_split))
        if base is None:  # first decision, or a crash before it was stored
            base = rep.store_eval(last_kept, val_split, rep.score(rep.val, carry, None))
        trial, trial_records = rep.score(rep.val, [*carry, this], s.id)
        trial_calls = rep.rows(trial_records, s.id)
        before, after = base.metric(metric), trial.metric(metric)
        kept = after >= before
        verdict = "kept" if kept else "dropped"
        note = f"{verdict}: validation {metric} accuracy {before:.3f} -> {after:.3f} ({len(rep.val)} instances)"
    with rep.engine.begin() as conn:
        if before is not None:
            store_calls(conn, trial_calls, trial_records)
        res = conn.execute(
            update(Session)
            .where(col(Session.id) == s.id, col(Session.context_kept).is_(None))
            .values(context_kept=kept, learn_note=note, learn_val_before=before, learn_val_after=after,
                    updated_at=utcnow())
        )
        if res.rowcount == 1 and kept and after is not None:
            conn.execute(insert(Evaluation).values(**_eval_values(rep.run.id or 0, s.ordinal, val_split, trial)))
    if res.rowcount == 1:
        if kept and after is not None:
            rep.evals[(s.ordinal, val_split)] = trial
        return kept
    with db_session(rep.engine) as db:  # another process decided first: its decision stands
        row = db.get(Session, s.id)
        return bool(row and row.context_kept)


def _interact(rep: _Rep, obs: Observer, s: Session, carry: Sequence[CarriedSession]) -> None:
    """INTERACT's inner loop for session s, one stored step at a time (resumes mid-session)."""
    agents = {Sender.MACHINE: rep.machine, Sender.HUMAN: rep.human}
    while True:
        if rep.stop.is_set():
            raise Interrupted("interrupted by the user")
        try:
            r = step(rep.engine, s.id or 0, agents, carry=carry)
        except StepConflict:
            continue  # another process stored this step: load and go on
        except SessionClosed:
            return
        if r.aborted is not None:  # nothing was stored; session_done reports the abort
            return
        obs.message(rep.run.repetition, s.ordinal, r.message.j, r.message.tag.value)
        if r.finished:
            return


def run_repetition(
    engine: Engine,
    exp: Experiment,
    run: Run,
    agents: Mapping[Sender, Agent],
    *,
    observer: Observer | None = None,
    stop: threading.Event | None = None,
) -> str:
    """INTERACT over the run's sessions in order, with LEARN and evaluations; returns the run's status.

    Resumes from whatever is stored: finished sessions are skipped, an open one goes on
    from its last message, a missing LEARN decision or evaluation is computed.
    """
    obs = observer or NullObserver()
    cfg = RunConfig.from_dict(exp.config)
    rid = run.id or 0
    with db_session(engine) as db:
        sessions = run_sessions(db, run_id=rid)
        evals = {
            (e.after_session, e.split): Score.of(e)
            for e in db.exec(select(Evaluation).where(Evaluation.run_id == rid)).all()
        }
    rep = _Rep(
        engine, cfg, exp, run, agents[Sender.MACHINE], agents[Sender.HUMAN],
        _split_views(engine, cfg.dataset, cfg.val_split) if cfg.learn else [],
        _split_views(engine, cfg.dataset, cfg.test_split),
        evals, stop or threading.Event(),
    )
    done = sum(1 for s in sessions if s.status != "open" and s.context_kept is not None)
    obs.run_started(run.repetition, rid, len(sessions), done)
    _set_run_status(engine, rid, "running", None)
    pool = rep.pool = ThreadPoolExecutor(max(1, call_limit()), thread_name_prefix=f"pxp-eval-{run.repetition}")
    try:
        test_split = cfg.test_split or "test"
        if cfg.eval_at_start and rep.test and (0, test_split) not in rep.evals:
            rep.store_eval(0, test_split, rep.score(rep.test, [], None))
        carry: list[CarriedSession] = []
        last_kept = 0
        for s in sessions:
            assert s.id is not None
            if s.status == "open":
                _interact(rep, obs, s, carry)
            with db_session(engine) as db:
                row = db.get(Session, s.id)
                assert row is not None
                msgs = tuple(session_msgs(db, session_id=s.id))
            finished = row.status == "finished"
            this = CarriedSession(s.id, instance_view(engine, s.instance_id), msgs) if finished else None
            if row.context_kept is None:
                kept = _learn(rep, row, carry, this, last_kept)
                obs.session_done(run.repetition, s.ordinal, row.status, kept)
            else:
                kept = bool(row.context_kept) and this is not None
            if kept and this is not None:
                carry.append(this)
                last_kept = s.ordinal
                if rep.test and (s.ordinal, test_split) not in rep.evals:
                    rep.store_eval(s.ordinal, test_split, rep.score(rep.test, carry, s.id), s.id)
    except AgentUnavailable as e:
        _set_run_status(engine, rid, "paused", f"{type(e).__name__}: {e}")
        obs.run_ended(run.repetition, "paused", str(e))
        return "paused"
    except Interrupted as e:
        _set_run_status(engine, rid, "paused", str(e))
        obs.run_ended(run.repetition, "paused", str(e))
        return "paused"
    finally:
        pool.shutdown()
    _set_run_status(engine, rid, "finished", None)
    obs.run_ended(run.repetition, "finished", None)
    return "finished"


def _set_run_status(engine: Engine, run_id: int, status: str, note: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(Run).where(col(Run.id) == run_id)
            .values(status=status, note=redact_any(note), updated_at=utcnow())
        )


def _set_experiment_status(engine: Engine, experiment_id: int, status: str, *, unless: str | None = None) -> None:
    """Set the experiment's status, except when it is `unless` (a Cancel that came first stands)."""
    q = update(Experiment).where(col(Experiment.id) == experiment_id)
    if unless is not None:
        q = q.where(col(Experiment.status) != unless)
    with engine.begin() as conn:
        conn.execute(q.values(status=status))


# --- the experiment ---------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """How run_experiment ended: the experiment's status, each repetition's, and the wall time."""

    experiment: str
    status: str
    runs: dict[int, tuple[str, str | None]]
    seconds: float

    @property
    def paused(self) -> dict[int, str | None]:
        return {r: note for r, (st, note) in self.runs.items() if st != "finished"}


def run_experiment(
    engine: Engine,
    experiment_id: int,
    *,
    agent_factory: AgentFactory = default_agents,
    observer: Observer | None = None,
    concurrency: int | None = None,
    stop: threading.Event | None = None,
) -> RunOutcome:
    """Run (or resume) every unfinished repetition of an experiment, all at the same time.

    `concurrency` (default: the stored config's) bounds the LLM calls in flight across
    all repetitions. Ctrl-C (KeyboardInterrupt) pauses every repetition after its
    current step and is raised again once they have stopped.
    """
    t0 = time.perf_counter()
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise RunError(f"experiment {experiment_id} does not exist")
        runs = experiment_runs(db, experiment_id=experiment_id)
    if exp.mode != "controlled":
        raise RunError(f"experiment {exp.name!r} is {exp.mode}, not a controlled run")
    cfg = RunConfig.from_dict(exp.config)
    set_call_limit(concurrency or cfg.concurrency)
    todo = [r for r in runs if r.status != "finished"]
    agents = {r.id: agent_factory(engine, exp, r) for r in todo}  # config errors surface before any work
    stop = stop or threading.Event()
    statuses: dict[int, tuple[str, str | None]] = {r.repetition: (r.status, r.note) for r in runs}
    if todo:
        _set_experiment_status(engine, experiment_id, "running", unless="cancelled")
        interrupted = False
        with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="pxp-rep") as pool:
            futures: dict[Future[str], Run] = {
                pool.submit(run_repetition, engine, exp, r, agents[r.id], observer=observer, stop=stop): r for r in todo
            }
            pending: set[Future[str]] = set(futures)
            while pending:
                try:
                    _, pending = wait(pending, timeout=0.25)
                except KeyboardInterrupt:
                    stop.set()
                    interrupted = True
            errors = [f for f in futures if f.exception() is not None]
        with db_session(engine) as db:
            statuses = {r.repetition: (r.status, r.note) for r in experiment_runs(db, experiment_id=experiment_id)}
        for f in errors:  # an unexpected error: that repetition stays resumable
            r = futures[f]
            _set_run_status(engine, r.id or 0, "failed", f"{type(f.exception()).__name__}: {f.exception()}")
            statuses[r.repetition] = ("failed", str(f.exception()))
        status = "finished" if all(st == "finished" for st, _ in statuses.values()) else "paused"
        _set_experiment_status(engine, experiment_id, status)
        if interrupted:
            raise KeyboardInterrupt
        if errors:
            raise errors[0].exception()  # type: ignore[misc]
    else:
        status = "finished"
        _set_experiment_status(engine, experiment_id, status)
    return RunOutcome(exp.name, status, statuses, time.perf_counter() - t0)


def resume_target(engine: Engine, name_or_id: str) -> Experiment:
    """The experiment `pxp run --resume` continues or `--like` repeats (a controlled one)."""
    with db_session(engine) as db:
        exp = find_experiment(db, name_or_id=name_or_id)
    if exp is None:
        raise RunError(f"no experiment named {name_or_id!r}")
    if exp.mode != "controlled":
        raise RunError(
            f"experiment {exp.name!r} is {exp.mode}; only controlled experiments can be resumed or repeated"
        )
    return exp


# --- accounting -------------------------------------------------------------------------------


@dataclass
class Usage:
    """Calls, tokens and cost of one repetition so far."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0


def run_usage(engine: Engine, experiment_id: int) -> dict[int, Usage]:
    """Usage per run id of an experiment (the progress display polls it)."""
    from sqlalchemy import func
    from sqlalchemy import select as sa_select

    q = (
        sa_select(
            col(LLMCall.run_id), func.count(), func.sum(col(LLMCall.tokens_in)), func.sum(col(LLMCall.tokens_out)),
            func.sum(col(LLMCall.cost_usd)),
        )
        .where(col(LLMCall.experiment_id) == experiment_id)
        .group_by(col(LLMCall.run_id))
    )
    with engine.connect() as conn:
        return {
            int(rid): Usage(int(n), int(ti or 0), int(to or 0), float(c or 0.0))
            for rid, n, ti, to, c in conn.execute(q).all()
            if rid is not None
        }


def run_counts(engine: Engine, experiment_id: int) -> dict[int, tuple[int, int, int]]:
    """repetition -> (run id, sessions, sessions done with their LEARN decision)."""
    with db_session(engine) as db:
        out = {}
        for r in experiment_runs(db, experiment_id=experiment_id):
            ss = run_sessions(db, run_id=r.id or 0)
            out[r.repetition] = (r.id or 0, len(ss), sum(1 for s in ss if s.context_kept is not None))
        return out


def usage_summary(engine: Engine, experiment_id: int) -> list[dict[str, Any]]:
    """Cost and latency per (purpose, provider, model): calls, errors, tokens, cost, latency."""
    from sqlalchemy import select as sa_select

    q = sa_select(
        col(LLMCall.purpose), col(LLMCall.provider), col(LLMCall.model), col(LLMCall.tokens_in),
        col(LLMCall.tokens_out), col(LLMCall.cache_read), col(LLMCall.cost_usd), col(LLMCall.latency_ms),
        col(LLMCall.error),
    ).where(col(LLMCall.experiment_id) == experiment_id)
    groups: dict[tuple[str, str, str], list[Any]] = {}
    with engine.connect() as conn:
        for row in conn.execute(q).all():
            groups.setdefault((row[0], row[1], row[2]), []).append(row)
    out = []
    for (purpose, provider, model), rows in sorted(groups.items()):
        lat = sorted(float(r[7] or 0.0) for r in rows)
        costs = [r[6] for r in rows if r[6] is not None]
        out.append({
            "purpose": purpose,
            "provider": provider,
            "model": model,
            "calls": len(rows),
            "errors": sum(1 for r in rows if r[8]),
            "tokens_in": sum(int(r[3] or 0) for r in rows),
            "tokens_out": sum(int(r[4] or 0) for r in rows),
            "cache_read": sum(int(r[5] or 0) for r in rows),
            "cost_usd": round(sum(costs), 6) if costs else None,
            "latency_mean_ms": round(sum(lat) / len(lat), 1) if lat else 0.0,
            "latency_p95_ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 1) if lat else 0.0,
        })
    return out
