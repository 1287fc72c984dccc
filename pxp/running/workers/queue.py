"""Repetitions as jobs on a PostgreSQL task queue, processed by `pxp worker`s (docs/operations.md, Workers).

The queue is procrastinate (a PostgreSQL-only task queue: its jobs live in its own tables of
the pxp database, so any machine that reaches the database can be a worker). One job is one
repetition: it calls pxp.running.pxp.controlled.runner.run_repetition, which resumes from the database at
session granularity. A job's procrastinate `lock` is its run, so a repetition runs in at most
one worker at a time (per-repetition ownership); its `queueing_lock` keeps a second enqueue
of the same repetition out.

A worker killed with SIGKILL leaves its job "doing"; its procrastinate heartbeat ages, and any
other live worker sends the job back to the queue after `stalled_after` seconds
(procrastinate's stalled-job retry: JobManager.get_stalled_jobs + retry_job). Whatever the
killed worker stored stays; the database's unique (session_id, j) key, not timing, keeps a
step from being stored twice.

`pxp run --distributed` keeps the experiment's claim (pxp.running.workers.pool.hold) while it waits,
so an in-process runner is refused meanwhile; the jobs themselves take no experiment claim.

This module: the task, one job, enqueue and the queue's state. procrastinate's tables (install
and upgrade): pxp.running.workers.queue_schema; waiting for the jobs (`pxp run --distributed`, also for
a grid): pxp.running.workers.queue_wait; the worker loop (`pxp worker`): pxp.running.workers.queue_worker.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from sqlalchemy import Engine, text, update
from sqlmodel import col

from pxp.errors import fault_note
from pxp.llm.limits import call_limit, set_call_limit
from pxp.llm.redact import redact_any
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.repetition import run_repetition
from pxp.running.pxp.controlled.runner import default_agents
from pxp.running.workers.queue_schema import STALLED_SECONDS, QueueError, conninfo, ensure_schema, is_postgres
from pxp.storage.store import db_session, experiment_runs
from pxp.storage.tables import Experiment, Run, utcnow

__all__ = ["FINAL", "QUEUE", "STALLED_SECONDS", "TASK", "QueueError", "abort", "enqueue", "ensure_schema",
           "is_postgres", "jobs", "make_app", "pause_unstarted", "run_job", "set_experiment",
           "workers"]

QUEUE = "pxp"
TASK = "pxp.repetition"
FINAL = ("succeeded", "failed", "cancelled", "aborted")
#: the note of a repetition whose job ended before any worker started it (pause_unstarted)
NOT_STARTED = "queued; its job ended before a worker started it"


def make_app(engine: Engine) -> procrastinate.App:
    """A procrastinate app on the pxp database with the repetition task registered."""
    ensure_schema(engine)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo(engine)))
    retry = procrastinate.RetryStrategy(max_attempts=1000, wait=1, retry_exceptions={WorkerStopped})
    app.task(name=TASK, queue=QUEUE, pass_context=True, retry=retry)(_repetition_task)
    return app


class WorkerStopped(QueueError):
    """The worker was asked to stop mid-repetition: the repetition paused and its job goes back to the queue."""


def _repetition_task(context: procrastinate.JobContext, experiment_id: int, run_id: int) -> str:
    extra = context.additional_context or {}
    engine: Engine = extra["engine"]
    stopping: threading.Event = extra["stopping"]
    running = extra.get("running")  # pxp.running.workers.queue_worker.Running: counts the repetitions under way
    if running is not None:
        running.enter()
    try:
        status = run_job(engine, experiment_id, run_id,
                         should_abort=lambda: stopping.is_set() or context.should_abort())
    finally:
        if running is not None:
            running.leave()
    if status == "paused" and stopping.is_set():
        raise WorkerStopped("the worker stopped; another worker resumes the repetition")
    return status


# --- one job: one repetition -------------------------------------------------------------------


def run_job(engine: Engine, experiment_id: int, run_id: int, *,
            should_abort: Callable[[], bool] | None = None, poll: float = 1.0) -> str:
    """Run (or resume) one repetition; its status. Stops (paused) when the experiment is
    cancelled or the job is aborted; the last repetition to finish finishes the experiment."""
    with db_session(engine) as db:
        exp, run = db.get(Experiment, experiment_id), db.get(Run, run_id)
    if exp is None or run is None or run.experiment_id != experiment_id:
        return "missing"  # deleted since it was enqueued
    if run.status == "finished":
        return "finished"
    cfg = RunConfig.from_dict(exp.config)
    if call_limit() < cfg.concurrency:
        set_call_limit(cfg.concurrency)
    stop, done = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.wait(poll):
            with contextlib.suppress(Exception):  # a busy database: look again at the next poll
                if (should_abort is not None and should_abort()) or _status(engine, experiment_id) == "cancelled":
                    stop.set()
                    return

    watcher = threading.Thread(target=watch, name=f"pxp-job-{run_id}", daemon=True)
    watcher.start()
    try:
        status = run_repetition(engine, exp, run, default_agents(engine, exp, run), stop=stop)
    except Exception as e:  # stored (one line, never the driver's text) and resumable; the job fails with it
        with contextlib.suppress(Exception):  # the database may be what failed: the job's retry resumes it
            _set_run(engine, run_id, "failed", fault_note(e, engine))
        raise
    finally:
        done.set()
        watcher.join()
    if status == "finished":
        _finish_if_done(engine, experiment_id)
    return status


def _status(engine: Engine, experiment_id: int) -> str | None:
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        return None if exp is None else exp.status


def _set_run(engine: Engine, run_id: int, status: str, note: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == run_id)
                     .values(status=status, note=redact_any(note), updated_at=utcnow()))


def set_experiment(engine: Engine, experiment_id: int, status: str, *, unless: str | None = None) -> None:
    q = update(Experiment).where(col(Experiment.id) == experiment_id)
    if unless is not None:
        q = q.where(col(Experiment.status) != unless)
    with engine.begin() as conn:
        conn.execute(q.values(status=status))


def pause_unstarted(engine: Engine, *experiment_ids: int) -> int:
    """The experiments' repetitions still "created" whose newest job has ended (cancelled while
    queued) read paused, as an in-process run's interrupted repetitions do, and `pxp run --resume`
    takes them up; how many changed."""
    q = text(
        "UPDATE run SET status = 'paused', note = :note, updated_at = :now "
        "WHERE status = 'created' AND experiment_id = ANY(:exps) AND id IN ("
        "SELECT run_id FROM (SELECT DISTINCT ON ((j.args->>'run_id')::int) (j.args->>'run_id')::int AS run_id, "
        "j.status::text AS st FROM procrastinate_jobs j WHERE j.task_name = :task "
        "AND (j.args->>'experiment_id')::int = ANY(:exps) ORDER BY (j.args->>'run_id')::int, j.id DESC) newest "
        "WHERE st = ANY(:final))"
    )
    with engine.begin() as conn:
        res = conn.execute(q, {"note": NOT_STARTED, "now": utcnow(), "exps": list(experiment_ids), "task": TASK,
                               "final": list(FINAL)})
    return int(res.rowcount)


def _finish_if_done(engine: Engine, experiment_id: int) -> None:
    with db_session(engine) as db:
        runs = experiment_runs(db, experiment_id=experiment_id)
    if runs and all(r.status == "finished" for r in runs):
        set_experiment(engine, experiment_id, "finished")


# --- enqueue and wait ----------------------------------------------------------------------------


def enqueue(engine: Engine, experiment_id: int) -> dict[int, int]:
    """Queue one job per unfinished repetition; repetition -> job id (an already queued one is kept)."""
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise QueueError(f"experiment {experiment_id} does not exist")
        if exp.mode != "controlled":
            raise QueueError(f"experiment {exp.name!r} is {exp.mode}, not a controlled run")
        runs = experiment_runs(db, experiment_id=experiment_id)
    todo = [r for r in runs if r.status != "finished"]
    if todo:
        set_experiment(engine, experiment_id, "running", unless="cancelled")
    app = make_app(engine)
    with app.open():
        for r in todo:
            lock = f"pxp-run-{r.id}"
            with contextlib.suppress(AlreadyEnqueued):
                app.configure_task(TASK, lock=lock, queueing_lock=lock).defer(
                    experiment_id=experiment_id, run_id=r.id or 0)
    return {rep: job for rep, (job, _) in jobs(engine, experiment_id).items()}


def jobs(engine: Engine, experiment_id: int) -> dict[int, tuple[int, str]]:
    """repetition -> (job id, status) of the newest job of each repetition of the experiment."""
    return jobs_of(engine, [experiment_id]).get(experiment_id, {})


def jobs_of(engine: Engine, experiment_ids: Iterable[int]) -> dict[int, dict[int, tuple[int, str]]]:
    """jobs() of several experiments in one query: experiment -> repetition -> (job id, status)."""
    q = text(
        "SELECT DISTINCT ON (r.experiment_id, r.repetition) r.experiment_id, r.repetition, j.id, j.status::text "
        "FROM procrastinate_jobs j JOIN run r ON r.id = (j.args->>'run_id')::int "
        "WHERE j.task_name = :task AND (j.args->>'experiment_id')::int = ANY(:exps) "
        "ORDER BY r.experiment_id, r.repetition, j.id DESC"
    )
    out: dict[int, dict[int, tuple[int, str]]] = {}
    with engine.connect() as conn:
        for exp, rep, jid, st in conn.execute(q, {"task": TASK, "exps": list(experiment_ids)}):
            out.setdefault(int(exp), {})[int(rep)] = (int(jid), str(st))
    return out


def workers(engine: Engine, *, alive_within: float = STALLED_SECONDS) -> list[dict[str, Any]]:
    """The queue's workers with a heartbeat younger than `alive_within` seconds."""
    q = text(
        "SELECT w.id, w.last_heartbeat, count(j.id) AS jobs FROM procrastinate_workers w "
        "LEFT JOIN procrastinate_jobs j ON j.worker_id = w.id AND j.status = 'doing' "
        "WHERE w.last_heartbeat > now() - make_interval(secs => :s) GROUP BY w.id ORDER BY w.id"
    )
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q, {"s": alive_within})]


def abort(engine: Engine, *experiment_ids: int) -> None:
    """Cancel the experiments' queued jobs (their repetitions read paused: pause_unstarted) and ask
    their running ones to stop (they pause)."""
    app = make_app(engine)
    with app.open():
        for states in jobs_of(engine, experiment_ids).values():
            for job, st in states.values():
                if st in ("todo", "doing"):
                    with contextlib.suppress(Exception):  # it ended meanwhile
                        app.job_manager.cancel_job_by_id(job, abort=True)
    pause_unstarted(engine, *experiment_ids)
