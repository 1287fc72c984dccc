"""The `pxp worker` loop: process repetition jobs of the queue (docs/operations.md, Workers; pxp.running.workers.queue).

procrastinate's Worker runs the jobs; a second task retries the jobs of workers whose heartbeat
aged past `stalled_after` (a worker killed with SIGKILL). A stop request (the event `pxp worker`'s
SIGINT/SIGTERM handler sets, which outlives a reconnection) pauses the running repetitions after their
current step and puts their jobs back in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import procrastinate
from procrastinate.worker import Worker
from sqlalchemy import Engine

from pxp.running.workers.queue import QUEUE, make_app
from pxp.running.workers.queue_schema import STALLED_SECONDS, QueueError


async def _recover(app: procrastinate.App, stalled_after: float) -> None:
    """Send the jobs of workers whose heartbeat is older than `stalled_after` back to the queue."""
    while True:
        await asyncio.sleep(max(0.5, stalled_after / 3))
        with contextlib.suppress(Exception):  # another worker retried it first, or a busy database
            for job in await app.job_manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=stalled_after):
                with contextlib.suppress(Exception):
                    await app.job_manager.retry_job(job)


async def _serve(engine: Engine, concurrency: int, stalled_after: float, name: str | None, burst: bool,
                 stop: threading.Event, idle: threading.Event) -> None:
    app = make_app(engine)
    running = Running(stop, idle)
    async with app.open_async():
        worker = Worker(
            app, queues=[QUEUE], concurrency=concurrency, name=name, wait=not burst,
            additional_context={"engine": engine, "stopping": stop, "running": running}, install_signal_handlers=False,
            update_heartbeat_interval=max(0.25, stalled_after / 4), stalled_worker_timeout=stalled_after,
            fetch_job_polling_interval=1.0, abort_job_polling_interval=1.0,
        )

        async def stop_when_told() -> None:  # running repetitions pause after their current step, then go back
            while not stop.is_set():
                await asyncio.sleep(STOP_POLL_S)
            running.check()
            worker.stop()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated

        watch = asyncio.create_task(stop_when_told())
        recover = asyncio.create_task(_recover(app, stalled_after))
        try:
            if not stop.is_set():
                await worker.run()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated
        finally:
            recover.cancel()
            watch.cancel()


#: how often the worker loop looks at its stop request (set by the signal handler of `pxp worker`)
STOP_POLL_S = 0.2


class Running:
    """The repetitions this worker runs now; `idle` is set once a stop is requested and none runs (each has
    paused and handed its job back), so that `pxp worker` may end even while procrastinate's own housekeeping
    waits for a database that does not answer."""

    def __init__(self, stop: threading.Event, idle: threading.Event) -> None:
        self.stop, self.idle, self.count, self._lock = stop, idle, 0, threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.count += 1

    def leave(self) -> None:
        with self._lock:
            self.count -= 1
        self.check()

    def check(self) -> None:
        with self._lock:
            if self.stop.is_set() and self.count == 0:
                self.idle.set()


def serve(engine: Engine, *, concurrency: int = 1, stalled_after: float = STALLED_SECONDS,
          name: str | None = None, burst: bool = False, stop: threading.Event | None = None,
          idle: threading.Event | None = None) -> None:
    """Process repetition jobs until `stop` is set (`pxp worker` sets it on SIGINT/SIGTERM), or until the queue
    is empty with `burst`.

    Once stopped, the running repetitions pause after their current step and their jobs go back to the queue for
    another worker; then `idle` is set (Running). Jobs of dead workers are retried after `stalled_after` s."""
    if concurrency < 1:
        raise QueueError("--concurrency must be at least 1")
    if stalled_after <= 0:
        raise QueueError("--stalled-after must be positive")
    asyncio.run(_serve(engine, concurrency, stalled_after, name, burst, stop or threading.Event(),
                       idle or threading.Event()))
