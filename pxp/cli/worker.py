"""`pxp worker`: process controlled-run repetitions queued by `pxp run --distributed` (docs/operations.md, Workers).

Any machine that reaches the PostgreSQL database can run workers; each one takes jobs (one
repetition each) from the queue in that database (pxp.running.workers.queue, procrastinate).
"""

from __future__ import annotations

import logging
import time
from typing import Annotated

import typer

from pxp.cli.common import app, err, fail, require_settings, state
from pxp.errors import fault_note, one_line, user_message
from pxp.storage.faults import is_database_error

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

    require_settings("models", "runs")
    engine = state.engine(must_exist=True)
    handler = logging.StreamHandler()
    handler.setFormatter(OneLine("%(asctime)s %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    logging.getLogger("pxp.llm.limits").setLevel(logging.NOTSET)  # a worker's log says when a limit halves
    who = f"pxp worker{f' {name}' if name else ''}"
    while True:
        try:
            ensure_schema(engine)
            err.print(f"{who}: concurrency {concurrency}, waiting for repetitions (Ctrl-C to stop)",
                      highlight=False, markup=False, soft_wrap=True)
            serve(engine, concurrency=concurrency, stalled_after=stalled_after, name=name, burst=burst)
            return
        except QueueError as e:
            fail(str(e))
        except Exception as e:  # its database went away: say so in one line and keep trying
            if burst or not is_database_error(e):
                raise
            err.print(f"{who}: {fault_note(e, engine)}; trying again in {RETRY_S:g} s", highlight=False,
                      markup=False, soft_wrap=True)
            time.sleep(RETRY_S)


#: seconds a worker whose database went away waits before it tries again
RETRY_S = 5.0


class OneLine(logging.Formatter):
    """A worker's log lines (procrastinate's included): one line each, a failure by pxp's one line
    (pxp.errors.user_message), never a trace, SQL or parameters."""

    def format(self, record: logging.LogRecord) -> str:
        message = one_line(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            message = f"{message}: {user_message(record.exc_info[1])}"
        record = logging.makeLogRecord({**record.__dict__, "msg": message, "args": None, "exc_info": None,
                                        "exc_text": None, "stack_info": None})
        return super().format(record)
