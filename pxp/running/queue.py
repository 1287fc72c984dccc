"""Repetitions as jobs on a PostgreSQL task queue, processed by `pxp worker`s (issue 14 §3).

The queue is procrastinate (a PostgreSQL-only task queue: its jobs live in its own tables of
the pxp database, so any machine that reaches the database can be a worker). One job is one
repetition: it calls pxp.running.runner.run_repetition, which resumes from the database at
session granularity. A job's procrastinate `lock` is its run, so a repetition runs in at most
one worker at a time (per-repetition ownership); its `queueing_lock` keeps a second enqueue
of the same repetition out.

A worker killed with SIGKILL leaves its job "doing"; its procrastinate heartbeat ages, and any
other live worker sends the job back to the queue after `stalled_after` seconds
(procrastinate's stalled-job retry: JobManager.get_stalled_jobs + retry_job). Whatever the
killed worker stored stays; the database's unique (session_id, j) key, not timing, keeps a
step from being stored twice.

`pxp run --distributed` keeps the experiment's claim (pxp.running.workers.hold) while it waits,
so an in-process runner is refused meanwhile; the jobs themselves take no experiment claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.worker import Worker
from sqlalchemy import Engine, text, update
from sqlmodel import col

from pxp.llm.limits import call_limit, set_call_limit
from pxp.llm.redact import redact_any
from pxp.running.config import RunConfig, RunError
from pxp.running.repetition import NullObserver, Observer, run_repetition
from pxp.running.runner import RunOutcome, default_agents, run_experiment
from pxp.storage.store import db_session, experiment_runs
from pxp.storage.tables import Experiment, Run, utcnow

QUEUE = "pxp"
TASK = "pxp.repetition"
STALLED_SECONDS = 30.0
NO_WORKER_WARNING = "no pxp worker is running; start one with `pxp worker`"
_SCHEMA_LOCK = 0x70787071  # pg_advisory_xact_lock key: one schema install at a time
_FINAL = ("succeeded", "failed", "cancelled", "aborted")


class QueueError(RunError):
    """The distributed runner cannot work here, in one line."""


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def _conninfo(engine: Engine) -> str:
    """The libpq URL of the pxp database (procrastinate speaks psycopg without SQLAlchemy)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def ensure_schema(engine: Engine) -> bool:
    """Install procrastinate's tables in the pxp database unless they are there; True if installed.

    Idempotent and safe when several workers start at once (a transaction-level advisory lock).
    """
    if not is_postgres(engine):
        raise QueueError("workers need a PostgreSQL database (they share it); "
                         "on SQLite run without --distributed (`pxp run` runs the repetitions in-process)")
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None:
            return False
    from procrastinate.schema import SchemaManager

    schema = SchemaManager.get_schema()
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None:
            return False
        driver: Any = conn.connection.driver_connection
        driver.execute(schema)  # several statements, no parameters: psycopg's simple protocol
    return True


def make_app(engine: Engine) -> procrastinate.App:
    """A procrastinate app on the pxp database with the repetition task registered."""
    ensure_schema(engine)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=_conninfo(engine)))
    retry = procrastinate.RetryStrategy(max_attempts=1000, wait=1, retry_exceptions={WorkerStopped})
    app.task(name=TASK, queue=QUEUE, pass_context=True, retry=retry)(_repetition_task)
    return app


class WorkerStopped(QueueError):
    """The worker was asked to stop mid-repetition: the repetition paused and its job goes back to the queue."""


def _repetition_task(context: procrastinate.JobContext, experiment_id: int, run_id: int) -> str:
    extra = context.additional_context or {}
    engine: Engine = extra["engine"]
    stopping: threading.Event = extra["stopping"]
    status = run_job(engine, experiment_id, run_id,
                     should_abort=lambda: stopping.is_set() or context.should_abort())
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
    except Exception as e:  # stored and resumable; the job fails with it
        _set_run(engine, run_id, "failed", f"{type(e).__name__}: {e}")
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


def _set_experiment(engine: Engine, experiment_id: int, status: str, *, unless: str | None = None) -> None:
    q = update(Experiment).where(col(Experiment.id) == experiment_id)
    if unless is not None:
        q = q.where(col(Experiment.status) != unless)
    with engine.begin() as conn:
        conn.execute(q.values(status=status))


def _finish_if_done(engine: Engine, experiment_id: int) -> None:
    with db_session(engine) as db:
        runs = experiment_runs(db, experiment_id=experiment_id)
    if runs and all(r.status == "finished" for r in runs):
        _set_experiment(engine, experiment_id, "finished")


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
        _set_experiment(engine, experiment_id, "running", unless="cancelled")
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
    q = text(
        "SELECT DISTINCT ON (r.repetition) r.repetition, j.id, j.status::text "
        "FROM procrastinate_jobs j JOIN run r ON r.id = (j.args->>'run_id')::int "
        "WHERE j.task_name = :task AND (j.args->>'experiment_id')::int = :exp "
        "ORDER BY r.repetition, j.id DESC"
    )
    with engine.connect() as conn:
        return {int(rep): (int(jid), str(st)) for rep, jid, st in conn.execute(q, {"task": TASK, "exp": experiment_id})}


def workers(engine: Engine, *, alive_within: float = STALLED_SECONDS) -> list[dict[str, Any]]:
    """The queue's workers with a heartbeat younger than `alive_within` seconds."""
    q = text(
        "SELECT w.id, w.last_heartbeat, count(j.id) AS jobs FROM procrastinate_workers w "
        "LEFT JOIN procrastinate_jobs j ON j.worker_id = w.id AND j.status = 'doing' "
        "WHERE w.last_heartbeat > now() - make_interval(secs => :s) GROUP BY w.id ORDER BY w.id"
    )
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q, {"s": alive_within})]


class _Relay:
    """Turns what the database says into the runner's Observer calls (pxp.running.progress draws them).

    A repetition decides its sessions in order, so each poll reads only the decisions after the last seen.
    """

    def __init__(self, engine: Engine, experiment_id: int, observer: Observer) -> None:
        self.engine, self.experiment_id, self.obs = engine, experiment_id, observer
        self.last: dict[int, int] = {}  # repetition -> last ordinal reported
        self.ended: set[int] = set()

    def poll(self, states: dict[int, tuple[int, str]]) -> None:
        with db_session(self.engine) as db:
            runs = experiment_runs(db, experiment_id=self.experiment_id)
        with self.engine.connect() as conn:
            for r in runs:
                rid, rep = r.id or 0, r.repetition
                if rep not in self.last:
                    total, done = conn.execute(text(
                        "SELECT count(*), count(context_kept) FROM session WHERE run_id = :r"), {"r": rid}).one()
                    self.last[rep] = int(done)
                    self.obs.run_started(rep, rid, int(total), int(done))
                for ordinal, status, kept in conn.execute(text(
                    "SELECT ordinal, status, context_kept FROM session WHERE run_id = :r "
                    "AND context_kept IS NOT NULL AND ordinal > :o ORDER BY ordinal"), {"r": rid, "o": self.last[rep]},
                ):
                    self.last[rep] = int(ordinal)
                    self.obs.session_done(rep, int(ordinal), str(status), bool(kept))
                job = states.get(rep)
                final = job is None or job[1] in _FINAL
                if final and rep not in self.ended and (r.status != "running" or job is not None):
                    self.ended.add(rep)
                    self.obs.run_ended(rep, r.status, r.note)


def run_distributed(
    engine: Engine,
    experiment_id: int,
    *,
    observer: Observer | None = None,
    concurrency: int | None = None,
    poll: float = 0.5,
    warn_after: float = 5.0,
    warn: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Queue the experiment's unfinished repetitions for `pxp worker`s and wait for them.

    The same contract as run_experiment (a RunOutcome; Ctrl-C raises KeyboardInterrupt):
    Ctrl-C asks the workers to pause every repetition (queued jobs are cancelled, running
    ones aborted) and returns once they have stopped. `concurrency` is the workers' business
    (`pxp worker --concurrency`, the stored config's call limit) and is ignored here. With no
    worker alive after `warn_after` s, `warn` (stderr by default) gets NO_WORKER_WARNING once.
    """
    t0 = time.perf_counter()
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        name = exp.name if exp is not None else str(experiment_id)
    enqueue(engine, experiment_id)
    relay = _Relay(engine, experiment_id, observer or NullObserver())
    interrupted, warned = False, False
    while True:
        try:
            states = jobs(engine, experiment_id)
            relay.poll(states)
            if all(st in _FINAL for _, st in states.values()):
                break
            if not warned and time.perf_counter() - t0 > warn_after and not workers(engine):
                warned = True
                (warn or (lambda line: print(f"warning: {line}", file=sys.stderr, flush=True)))(NO_WORKER_WARNING)
            time.sleep(poll)
        except KeyboardInterrupt:
            if interrupted:
                break  # a second Ctrl-C: stop waiting
            interrupted = True
            _abort(engine, experiment_id)
    with db_session(engine) as db:
        runs = experiment_runs(db, experiment_id=experiment_id)
    statuses = {r.repetition: (r.status, r.note) for r in runs}
    status = "finished" if all(st == "finished" for st, _ in statuses.values()) else "paused"
    _set_experiment(engine, experiment_id, status, unless="cancelled" if status != "finished" else None)
    if interrupted:
        raise KeyboardInterrupt
    return RunOutcome(name, status, statuses, time.perf_counter() - t0)


def runner(engine: Engine, distributed: bool) -> Callable[..., RunOutcome]:
    """How `pxp run` runs an experiment: run_experiment in-process, or over the workers (PostgreSQL)."""
    if not distributed:
        return run_experiment
    ensure_schema(engine)
    return run_distributed


def _abort(engine: Engine, experiment_id: int) -> None:
    """Cancel the experiment's queued jobs and ask its running ones to stop (they pause)."""
    app = make_app(engine)
    with app.open():
        for job, st in jobs(engine, experiment_id).values():
            if st in ("todo", "doing"):
                with contextlib.suppress(Exception):  # it ended meanwhile
                    app.job_manager.cancel_job_by_id(job, abort=True)


# --- the worker ----------------------------------------------------------------------------------


async def _recover(app: procrastinate.App, stalled_after: float) -> None:
    """Send the jobs of workers whose heartbeat is older than `stalled_after` back to the queue."""
    while True:
        await asyncio.sleep(max(0.5, stalled_after / 3))
        with contextlib.suppress(Exception):  # another worker retried it first, or a busy database
            for job in await app.job_manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=stalled_after):
                with contextlib.suppress(Exception):
                    await app.job_manager.retry_job(job)


async def _serve(engine: Engine, concurrency: int, stalled_after: float, name: str | None, burst: bool) -> None:
    app = make_app(engine)
    stopping = threading.Event()
    async with app.open_async():
        worker = Worker(
            app, queues=[QUEUE], concurrency=concurrency, name=name, wait=not burst,
            additional_context={"engine": engine, "stopping": stopping}, install_signal_handlers=False,
            update_heartbeat_interval=max(0.25, stalled_after / 4), stalled_worker_timeout=stalled_after,
            fetch_job_polling_interval=1.0, abort_job_polling_interval=1.0,
        )

        def on_signal() -> None:  # running repetitions pause after their current step, then go back to the queue
            stopping.set()
            worker.stop()  # type: ignore[no-untyped-call]

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        recover = asyncio.create_task(_recover(app, stalled_after))
        try:
            await worker.run()  # type: ignore[no-untyped-call]
        finally:
            recover.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def serve(engine: Engine, *, concurrency: int = 1, stalled_after: float = STALLED_SECONDS,
          name: str | None = None, burst: bool = False) -> None:
    """Process repetition jobs until stopped, or until the queue is empty with `burst`.

    SIGINT/SIGTERM pause the running repetitions after their current step and put their jobs
    back in the queue for another worker. Jobs of dead workers are retried after `stalled_after` s."""
    if concurrency < 1:
        raise QueueError("--concurrency must be at least 1")
    if stalled_after <= 0:
        raise QueueError("--stalled-after must be positive")
    asyncio.run(_serve(engine, concurrency, stalled_after, name, burst))
