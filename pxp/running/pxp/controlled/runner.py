"""Controlled experiments: INTERACT(X, n, k) over R repetitions (the follow-up paper's Method).

The orchestration: an experiment stored by pxp.running.pxp.experiments runs (or resumes) its
unfinished repetitions (pxp.running.pxp.controlled.repetition) at the same time in threads, and every LLM
call holds one slot of the shared limit (pxp.llm.limits). A run is resumed from the
database alone; the usage queries here feed the progress display and the CLI's summary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Engine, func, update
from sqlalchemy import select as sa_select
from sqlmodel import col

from pxp.agents.base import Agent
from pxp.errors import fault_note
from pxp.llm.limits import set_call_limit
from pxp.protocols.pxp.rules import Sender
from pxp.protocols.settings import value as setting
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.controlled.repetition import Observer, run_repetition, set_run_status
from pxp.running.pxp.factory import make_agents
from pxp.storage.faults import DatabaseFault, describe, is_database_error, is_transient, retrying, shown_database
from pxp.storage.store import db_session, experiment_runs, find_experiment, run_sessions
from pxp.storage.tables import Experiment, LLMCall, Run

AgentFactory = Callable[[Engine, Experiment, Run], Mapping[Sender, Agent]]


def default_agents(engine: Engine, exp: Experiment, run: Run) -> Mapping[Sender, Agent]:
    """The agents the experiment's config names (pxp.running.pxp.factory)."""
    return make_agents(engine, exp, run)


def _set_experiment_status(engine: Engine, experiment_id: int, status: str, *, unless: str | None = None) -> None:
    """Set the experiment's status, except when it is `unless` (a Cancel that came first stands)."""
    q = update(Experiment).where(col(Experiment.id) == experiment_id)
    if unless is not None:
        q = q.where(col(Experiment.status) != unless)
    with engine.begin() as conn:
        conn.execute(q.values(status=status))


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
        try:
            _set_experiment_status(engine, experiment_id, "running", unless="cancelled")
        except Exception as fault:
            if not is_database_error(fault):
                raise
            raise DatabaseFault(f"the database {shown_database(engine)} failed: {describe(fault)}; nothing was "
                                "run") from None
        interrupted = False
        faults: dict[int, float] = {}  # run id -> when its database fault began
        with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="pxp-rep") as pool:
            futures: dict[Future[str], Run] = {
                pool.submit(run_repetition, engine, exp, r, agents[r.id], observer=observer, stop=stop): r for r in todo
            }
            pending: set[Future[str]] = set(futures)
            while pending:
                try:
                    done, pending = wait(pending, timeout=0.25)
                except KeyboardInterrupt:
                    stop.set()
                    interrupted = True
                    continue
                for f in done:  # a database fault is waited out: the repetition resumes from what is stored
                    r, exc = futures[f], f.exception()
                    if exc is None or not is_transient(exc) or stop.is_set():
                        continue
                    if (r.id or 0) not in faults:  # one line when the wait begins, not one a try
                        _say(observer, f"rep {r.repetition}: the database {shown_database(engine)} failed: "
                                       f"{describe(exc)}; waiting up to {db_retry_seconds():g} s for it")
                    began = faults.setdefault(r.id or 0, time.monotonic())
                    if time.monotonic() - began < db_retry_seconds():
                        time.sleep(DB_RETRY_WAIT)
                        del futures[f]
                        again = pool.submit(run_repetition, engine, exp, r, agents[r.id], observer=observer, stop=stop)
                        futures[again] = r
                        pending.add(again)
            errors = [f for f in futures if f.exception() is not None]
        statuses = _final_statuses(engine, experiment_id, statuses, [(futures[f], f.exception()) for f in errors])
        status = "finished" if all(st == "finished" for st, _ in statuses.values()) else "paused"
        _quietly(lambda: _set_experiment_status(engine, experiment_id, status))
        if interrupted:
            raise KeyboardInterrupt
        unexpected = [f.exception() for f in errors if not is_database_error(f.exception() or Exception())]
        if unexpected:
            first = unexpected[0]
            assert first is not None  # `errors` holds only futures that raised
            raise first
    else:
        status = "finished"
        _set_experiment_status(engine, experiment_id, status)
    return RunOutcome(exp.name, status, statuses, time.perf_counter() - t0)


#: seconds between tries while a run waits out a lost database
DB_RETRY_WAIT = 1.0


def _say(observer: Observer | None, line: str) -> None:
    """A line of its own on the progress display (its `note`), if it has one."""
    note = getattr(observer, "note", None)
    if note is not None:
        note(line)


def db_retry_seconds() -> float:
    """How long a run waits out a lost database (a cut connection, a locked or full file) before it pauses:
    PXP_DB_RETRY_S (docs/operations.md, Settings)."""
    return float(setting("PXP_DB_RETRY_S"))


def _quietly(write: Callable[[], None], tries: int = 3) -> bool:
    """A status write while the database may be away: a few tries, then give up (the run stays resumable)."""
    try:
        retrying(write, tries, DB_RETRY_WAIT)
        return True
    except Exception as exc:
        if not is_database_error(exc):
            raise
        return False


def _final_statuses(engine: Engine, experiment_id: int, known: dict[int, tuple[str, str | None]],
                    errors: list[tuple[Run, BaseException | None]]) -> dict[int, tuple[str, str | None]]:
    """Each repetition's status after the run: as stored, and a repetition that raised is paused with
    one line (a database fault named by pxp.storage.faults, never the driver's text)."""
    statuses = dict(known)
    try:
        with db_session(engine) as db:
            statuses = {r.repetition: (r.status, r.note) for r in experiment_runs(db, experiment_id=experiment_id)}
    except Exception as away:
        if not is_database_error(away):
            raise
    for r, exc in errors:
        if exc is None:
            continue
        status, note = ("paused" if is_database_error(exc) else "failed"), fault_note(exc, engine)
        _quietly(partial(set_run_status, engine, r.id or 0, status, note))
        statuses[r.repetition] = (status, note)
    return statuses


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
            "no_usage": sum(1 for r in rows if r[3] is None),
            "cost_usd": round(sum(costs), 6) if costs else None,
            "latency_mean_ms": round(sum(lat) / len(lat), 1) if lat else 0.0,
            "latency_p95_ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 1) if lat else 0.0,
        })
    return out
