"""Waiting for queued repetitions: `pxp run --distributed`, for one experiment or a grid's (docs/operations.md,
Workers).

Everything is enqueued at once (pxp.running.workers.queue.enqueue), then the database is polled: the
sessions the workers decide are relayed to the runner's Observer (pxp.running.pxp.controlled.progress draws
them), and the experiments are concluded once every job has ended. Ctrl-C asks the workers to
pause every repetition (queued jobs are cancelled and their repetitions read paused, running
ones aborted); so does a cancel from the app, which is never counted as a Ctrl-C.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

from sqlalchemy import Engine, text

from pxp.running.pxp.controlled.repetition import NullObserver, Observer
from pxp.running.pxp.controlled.runner import RunOutcome
from pxp.running.workers.queue import FINAL, abort, enqueue, jobs_of, set_experiment, workers
from pxp.storage.store import db_session, experiment_runs
from pxp.storage.tables import Experiment

NO_WORKER_WARNING = "no pxp worker is running; start one with `pxp worker`"


def _stderr(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


class _Relay:
    """Turns what the database says into the runner's Observer calls (pxp.running.pxp.controlled.progress draws them).

    A repetition decides its sessions in order, so each poll reads only the decisions after the last seen.
    """

    def __init__(self, engine: Engine, experiment_id: int, observer: Observer) -> None:
        self.engine, self.experiment_id, self.obs = engine, experiment_id, observer
        self.last: dict[int, int] = {}  # repetition -> last ordinal reported
        self.ended: set[int] = set()
        self.finished = False  # every repetition finished in pxp's own tables (whatever their jobs say)

    def poll(self, states: dict[int, tuple[int, str]]) -> None:
        with db_session(self.engine) as db:
            runs = experiment_runs(db, experiment_id=self.experiment_id)
        self.finished = bool(runs) and all(r.status == "finished" for r in runs)
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
                final = job is None or job[1] in FINAL
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
    cancelled: threading.Event | None = None,
) -> RunOutcome:
    """Queue the experiment's unfinished repetitions for `pxp worker`s and wait for them.

    The same contract as run_experiment (a RunOutcome; Ctrl-C raises KeyboardInterrupt):
    Ctrl-C asks the workers to pause every repetition (queued jobs are cancelled, running
    ones aborted) and returns once they have stopped. `concurrency` is the workers' business
    (`pxp worker --concurrency`, the stored config's call limit) and is ignored here. With no
    worker alive after `warn_after` s, `warn` (stderr by default) gets NO_WORKER_WARNING once.
    `cancelled` (set by a Hold's cancel) pauses as a first Ctrl-C does, never as a second.
    """
    observers = {experiment_id: observer} if observer is not None else {}
    return run_many(engine, [experiment_id], observers=observers, poll=poll, warn_after=warn_after, warn=warn,
                    cancelled=cancelled)[0]


def run_many(
    engine: Engine,
    experiment_ids: Sequence[int],
    *,
    observers: Mapping[int, Observer] | None = None,
    poll: float = 0.5,
    warn_after: float = 5.0,
    warn: Callable[[str], None] | None = None,
    cancelled: threading.Event | None = None,
) -> list[RunOutcome]:
    """run_distributed for several experiments at once (a grid): every unfinished repetition of
    each is queued before the first wait, so the workers take them in any order; one outcome per
    experiment, in the given order. Ctrl-C pauses every repetition of every experiment, and so does
    `cancelled` (the experiments' Holds set it on a cancel from the app): however many cancels come,
    only a second real SIGINT stops the wait before the workers have stopped. The wait ends when every job has
    ended or every repetition is finished in pxp's tables (a job a stopped worker left "doing" does not hold it);
    an interrupt after every repetition finished is no interrupt."""
    t0 = time.perf_counter()
    ids = list(dict.fromkeys(experiment_ids))
    cancel = cancelled or threading.Event()
    with _Interrupts() as ctrl_c:
        for eid in ids:
            enqueue(engine, eid)
        relays = [_Relay(engine, eid, (observers or {}).get(eid) or NullObserver()) for eid in ids]
        aborted, warned = False, False
        while ctrl_c.count < 2:  # a second Ctrl-C: stop waiting
            if (ctrl_c.count or cancel.is_set()) and not aborted:
                aborted = True
                abort(engine, *ids)
            try:
                states = jobs_of(engine, ids)
                for relay in relays:
                    relay.poll(states.get(relay.experiment_id, {}))
                if all(st in FINAL for s in states.values() for _, st in s.values()) or \
                        all(relay.finished for relay in relays):  # a job left "doing" by a stopped worker
                    break
                if not warned and time.perf_counter() - t0 > warn_after and not workers(engine):
                    warned = True
                    (warn or _stderr)(NO_WORKER_WARNING)
                time.sleep(poll)
            except KeyboardInterrupt:  # not the main thread's handler (e.g. _thread.interrupt_main)
                ctrl_c.count += 1
        outcomes = [_conclude(engine, eid, time.perf_counter() - t0) for eid in ids]
    if (ctrl_c.count or cancel.is_set()) and any(o.paused for o in outcomes):  # a finished run is never "paused"
        raise KeyboardInterrupt
    return outcomes


class _Interrupts:
    """Counts SIGINTs (Ctrl-C; a Hold's cancel sets an Event instead) instead of raising KeyboardInterrupt in the middle
    of a database call, which left a pooled connection mid-query; the wait loop acts between polls."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _conclude(engine: Engine, experiment_id: int, seconds: float) -> RunOutcome:
    """The experiment's outcome from its runs; finished once all are, else paused (unless cancelled)."""
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        name = exp.name if exp is not None else str(experiment_id)
        runs = experiment_runs(db, experiment_id=experiment_id)
    statuses = {r.repetition: (r.status, r.note) for r in runs}
    status = "finished" if all(st == "finished" for st, _ in statuses.values()) else "paused"
    set_experiment(engine, experiment_id, status, unless=None if status == "finished" else "cancelled")
    return RunOutcome(name, status, statuses, seconds)
