"""`pxp worker`: process controlled-run repetitions queued by `pxp run --distributed` (docs/operations.md, Workers).

Any machine that reaches the PostgreSQL database can run workers; each one takes jobs (one
repetition each) from the queue in that database (pxp.running.workers.queue, procrastinate).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from typing import Annotated

import typer

from pxp.cli.common import app, err, fail, require_settings, state
from pxp.errors import one_line, user_message
from pxp.storage.faults import describe, is_database_error, shown_database

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
    from pxp.storage.store import get_engine

    require_settings("models", "runs")
    handler = logging.StreamHandler()
    database = shown_database(state.db)
    handler.setFormatter(OneLine("%(asctime)s %(message)s", database))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    logging.getLogger("pxp.llm.limits").setLevel(logging.NOTSET)  # a worker's log says when a limit halves
    who = f"pxp worker{f' {name}' if name else ''}"
    stop, idle = _stop_on_signals(who)
    while not stop.is_set():
        try:  # the database is opened inside the loop: a worker that cannot reach it at start tries again too
            engine = get_engine(state.db, must_exist=True, migrate=False)
            ensure_schema(engine)
            err.print(f"{who}: concurrency {concurrency}, waiting for repetitions (Ctrl-C to stop)",
                      highlight=False, markup=False, soft_wrap=True)
            serve(engine, concurrency=concurrency, stalled_after=stalled_after, name=name, burst=burst, stop=stop,
                  idle=idle)
            break
        except QueueError as e:
            fail(str(e))
        except Exception as e:  # its database went away: say so in one line and keep trying, unless told to stop
            if burst or not is_database_error(e):
                if is_database_error(e):
                    fail(f"the database {database} failed: {describe(e)}")
                raise
            if stop.is_set():
                break
            err.print(f"{who}: the database {database} failed: {describe(e)}; trying again in {RETRY_S:g} s",
                      highlight=False, markup=False, soft_wrap=True)
            stop.wait(RETRY_S)
    if stop.is_set():
        err.print(f"{who}: stopped", highlight=False, markup=False, soft_wrap=True)


#: seconds a worker whose database went away waits before it tries again
RETRY_S = 5.0
#: the longest a worker takes to stop after SIGINT/SIGTERM (docs/operations.md, Workers): its repetitions pause
#: after their current step; past this it exits anyway, and their jobs are retried by another worker
STOP_S = 30.0
#: once every repetition is handed back, the longest the worker's own housekeeping may take before it exits
HOUSEKEEPING_S = 5.0


def _stop_on_signals(who: str) -> tuple[threading.Event, threading.Event]:
    """SIGINT/SIGTERM set the first event returned (the worker stops taking jobs and pauses the running ones);
    the worker loop sets the second once none runs. The process then ends within HOUSEKEEPING_S even if
    procrastinate's own housekeeping waits for a database that does not answer, and within STOP_S in any case;
    a second signal ends it at once. Installed before the database is opened: a stop while reconnecting stops."""
    stop, idle = threading.Event(), threading.Event()

    def say(line: str) -> None:
        os.write(2, f"{who}: {line}\n".encode())

    def end(why: str, code: int) -> None:
        say(why)
        os._exit(code)

    def watch() -> None:
        if idle.wait(STOP_S):
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < HOUSEKEEPING_S:
                time.sleep(0.1)
            end("stopped (every repetition handed back; the database did not answer the worker's last "
                "housekeeping, which other workers do for it)", 0)
        end(f"not stopped within {STOP_S:g} s; exiting now: its running repetitions are retried by another worker "
            "once its heartbeat is --stalled-after seconds old (nothing stored is lost)", 1)

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            end("a second stop signal; exiting now: its running repetitions are retried by another worker once "
                "its heartbeat is --stalled-after seconds old (nothing stored is lost)", 130)
        stop.set()
        say(f"stopping: running repetitions pause after their current step (at most {STOP_S:g} s; a second "
            "Ctrl-C stops at once)")
        threading.Thread(target=watch, name="pxp-worker-stop", daemon=True).start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    return stop, idle


#: a driver's exception repr in a log message (`ConnectorException('\\n    Database error.\\n    ')`): its words only
_REPR = re.compile(r"\b[A-Za-z_][\w.]*(?:Exception|Error)\((?:'([^']*)'|\"([^\"]*)\")?\)")


def _words(match: re.Match[str]) -> str:
    inner = (match.group(1) or match.group(2) or "").replace("\\n", " ").replace("\\t", " ")
    return " ".join(inner.split()).rstrip(".").lower() or "an error"


class OneLine(logging.Formatter):
    """A worker's log lines (procrastinate's included): one line each, a failure by pxp's one line
    (pxp.errors.user_message; a database fault names the database), never a trace, SQL, parameters or a
    driver's exception repr."""

    def __init__(self, fmt: str, database: str) -> None:
        super().__init__(fmt)
        self.database = database

    def format(self, record: logging.LogRecord) -> str:
        message = _REPR.sub(_words, one_line(record.getMessage()))
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            why = (f"the database {self.database} failed: {describe(exc)}" if is_database_error(exc)
                   else user_message(exc))
            message = f"{message}: {why}"
        record = logging.makeLogRecord({**record.__dict__, "msg": message, "args": None, "exc_info": None,
                                        "exc_text": None, "stack_info": None})
        return super().format(record)
