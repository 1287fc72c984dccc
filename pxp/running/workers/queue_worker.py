"""The `pxp worker` loop: process repetition jobs of the queue (docs/operations.md, Workers; pxp.running.workers.queue).

procrastinate's Worker runs the jobs; a second task retries the jobs of workers whose heartbeat
aged past `stalled_after` (a worker killed with SIGKILL). SIGINT/SIGTERM pause the running
repetitions after their current step and put their jobs back in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
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
            worker.stop()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        recover = asyncio.create_task(_recover(app, stalled_after))
        try:
            await worker.run()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated
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
