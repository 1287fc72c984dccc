"""`pxp worker`: process controlled-run repetitions queued by `pxp run --distributed` (docs/operations.md, Workers).

Any machine that reaches the PostgreSQL database can run workers; each one takes jobs (one
repetition each) from the queue in that database (pxp.running.workers.queue, procrastinate).
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from pxp.cli.common import app, err, fail, state

_HELP = (
    "Process repetitions queued by `pxp run --distributed` (PostgreSQL only) until stopped."
    "\n\nCtrl-C or SIGTERM pauses the running repetitions after their current step and puts them back in the "
    "queue for another worker. A worker killed outright leaves its repetitions to be retried by a live worker "
    "once its heartbeat is --stalled-after seconds old; nothing stored is repeated."
)


@app.command("worker", help=_HELP)
def worker_cmd(
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Repetitions this worker runs at once.")] = 1,
    stalled_after: Annotated[float, typer.Option(
        "--stalled-after", help="Seconds without a heartbeat after which a worker's jobs are retried.")] = 30.0,
    name: Annotated[str | None, typer.Option("--name", help="Worker name (shown with its jobs).")] = None,
    burst: Annotated[bool, typer.Option("--burst", help="Stop once the queue is empty.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log every job.")] = False,
) -> None:
    """Process repetitions queued by `pxp run --distributed` (PostgreSQL only) until stopped."""
    from pxp.running.workers.queue_schema import QueueError, ensure_schema
    from pxp.running.workers.queue_worker import serve

    engine = state.engine(must_exist=True)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(message)s")
    try:
        ensure_schema(engine)
        err.print(f"pxp worker{f' {name}' if name else ''}: concurrency {concurrency}, waiting for repetitions "
                  "(Ctrl-C to stop)", highlight=False, markup=False, soft_wrap=True)
        serve(engine, concurrency=concurrency, stalled_after=stalled_after, name=name, burst=burst)
    except QueueError as e:
        fail(str(e))
