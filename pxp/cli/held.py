"""Running one stored experiment from the command line, as `pxp run` and `pxp run --grid` both do.

The run holds the experiment's claim and heartbeat (pxp.running.workers) like the app's workers:
one worker per experiment, the app shows it as running, and its Cancel pauses it as Ctrl-C does.
Every failure is one line; a failed or interrupted repetition stays stored and resumable.
"""

from __future__ import annotations

import signal
from typing import Any

import typer

from pxp.cli.common import err, fail
from pxp.running.config import RunError
from pxp.running.progress import make_progress
from pxp.running.queue_wait import runner
from pxp.running.repetition import NullObserver
from pxp.running.runner import RunOutcome
from pxp.running.workers import WorkerError, hold


def run_held(engine: Any, experiment_id: int, name: str, *, show_progress: bool, concurrency: int | None,
             distributed: bool = False, paused_note: str = "every repetition is paused") -> RunOutcome:
    """Run (or resume) the experiment under its claim; exits with one line on any failure."""
    hint = f"resume with `pxp run --resume {name}`"
    observer: Any = make_progress(engine, experiment_id, err) if show_progress else NullObserver()
    held = hold(engine, experiment_id, on_cancel=signal.SIGINT)
    try:
        with held:
            run = runner(engine, distributed)
            if show_progress:
                with observer:
                    return run(engine, experiment_id, observer=observer, concurrency=concurrency)
            return run(engine, experiment_id, concurrency=concurrency)
    except WorkerError as e:
        fail(str(e))
    except KeyboardInterrupt:
        why = "cancelled from another worker" if held.cancelled else "interrupted"
        err.print(f"{why}: {paused_note}; {hint}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except (RunError, ValueError) as e:
        fail(f"{e}; the experiment {name!r} is stored, {hint} once fixed")
    except Exception as e:  # a failed repetition: stored and resumable; one line, never a trace
        fail(f"a repetition of {name} failed ({type(e).__name__}: {e}); {hint}")
