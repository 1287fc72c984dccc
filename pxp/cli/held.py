"""Running one stored experiment from the command line, as `pxp run` and `pxp run --grid` both do.

The run holds the experiment's claim and heartbeat (pxp.running.workers.pool) like the app's workers:
one worker per experiment, the app shows it as running, and its Cancel pauses it as Ctrl-C does.
Every failure is one line; a failed or interrupted repetition stays stored and resumable.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from pxp.cli.common import err, fail
from pxp.errors import fault_note, user_message
from pxp.llm.local import listening
from pxp.running.pxp.config import RunError
from pxp.running.pxp.controlled.progress import StudyProgress, make_progress
from pxp.running.pxp.controlled.repetition import NullObserver
from pxp.running.pxp.controlled.runner import RunOutcome, run_experiment
from pxp.running.workers.pool import WorkerError, hold
from pxp.storage.faults import is_database_error


def _warner(display: Any) -> Callable[[str], None]:
    """The no-worker warning: through the progress display (above its bars), else one line on stderr."""
    note = getattr(display, "note", None)
    if note is None:
        return lambda line: err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    return lambda line: note(f"warning: {line}")


def _hear_ctrl_c() -> None:
    """The app's Cancel reaches an in-process run as a SIGINT to itself: a run started in the background by a
    shell without job control (`pxp run … &` in a script) inherits SIGINT ignored, and would never stop."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def runner(engine: Any, distributed: bool) -> Callable[..., RunOutcome]:
    """How `pxp run` runs an experiment: run_experiment in-process, or over the workers (PostgreSQL), whose modules
    (procrastinate, psycopg) load only then (docs/development.md, "Start-up")."""
    if not distributed:
        return run_experiment
    from pxp.running.workers.queue_schema import ensure_schema
    from pxp.running.workers.queue_wait import run_distributed

    ensure_schema(engine)
    return run_distributed


def run_held(engine: Any, experiment_id: int, name: str, *, show_progress: bool, concurrency: int | None,
             distributed: bool = False, paused_note: str = "every repetition is paused") -> RunOutcome:
    """Run (or resume) the experiment under its claim; exits with one line on any failure."""
    hint = f"resume with: {resume_command([name], distributed=distributed)}"
    observer: Any = make_progress(engine, experiment_id, err.real()) if show_progress else NullObserver()
    cancel = threading.Event()  # distributed: a cancel from the app pauses as Ctrl-C does, never counts as one
    if not distributed:
        _hear_ctrl_c()
    held = hold(engine, experiment_id, on_cancel=cancel.set if distributed else signal.SIGINT)
    extra: dict[str, Any] = {"warn": _warner(observer), "cancelled": cancel} if distributed else {}
    try:
        with held:
            run = runner(engine, distributed)
            if show_progress:  # a slow call (a local server loading the model) is said on the progress display
                with observer, listening(observer.note):
                    return run(engine, experiment_id, observer=observer, concurrency=concurrency, **extra)
            return run(engine, experiment_id, concurrency=concurrency, **extra)
    except WorkerError as e:
        fail(str(e))
    except KeyboardInterrupt:
        why = "cancelled from another worker" if held.cancelled else "interrupted"
        err.print(f"{why}: {paused_note}; {hint}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except (RunError, ValueError) as e:
        fail(f"{e}; the experiment {name!r} is stored, {hint} once fixed")
    except Exception as e:  # a failed repetition: stored and resumable; one line, never a trace
        _paused_or_failed(e, engine, f"a repetition of {name} failed", hint)


def run_study_held(engine: Any, experiments: list[tuple[int, str]], *, show_progress: bool) -> list[RunOutcome]:
    """`pxp run --grid --distributed`: queue every experiment of the study at once and wait for all,
    each experiment's claim held meanwhile (one display); exits with one line on any failure, 130 on Ctrl-C."""
    hint = f"resume with: {resume_command([name for _, name in experiments], distributed=True)}"
    display: Any = StudyProgress(engine, experiments, err.real()) if show_progress else None
    cancel = threading.Event()  # set by any experiment's cancel from the app; never a second Ctrl-C
    holds = [hold(engine, eid, on_cancel=cancel.set) for eid, _ in experiments]
    from pxp.running.workers.queue_schema import ensure_schema
    from pxp.running.workers.queue_wait import run_many

    try:
        ensure_schema(engine)
        with contextlib.ExitStack() as stack:
            for h in holds:
                stack.enter_context(h)
            if display is not None:
                stack.enter_context(display)
            return run_many(engine, [eid for eid, _ in experiments],
                            observers=display.observers if display is not None else None, warn=_warner(display),
                            cancelled=cancel)
    except WorkerError as e:
        fail(str(e))
    except KeyboardInterrupt:  # raised only when a repetition did not finish (queue_wait.run_many)
        why = "cancelled from another worker" if any(h.cancelled for h in holds) else "interrupted"
        err.print(f"{why}: the study's unfinished repetitions are paused; {hint}", highlight=False, markup=False,
                  soft_wrap=True)
        raise typer.Exit(130) from None
    except (RunError, ValueError) as e:
        fail(f"{e}; the study's experiments are stored, {hint} once fixed")
    except Exception as e:  # one line, never a trace; everything stored stays
        _paused_or_failed(e, engine, "the study's run failed", hint)


def resume_command(names: list[str], *, distributed: bool) -> str:
    """The real command that resumes these experiments (one after another), with the flags it needs: `--db` as
    given (unless it holds a password, which is never printed) and `--distributed`."""
    from pxp.cli.common import state

    db = ""
    if state.created is not None:  # a database this command makes: named by the file asked for
        db = f" --db {shlex.quote(f'sqlite:///{state.created[0]}')}"
    elif state.db:
        from sqlalchemy.engine import make_url

        try:
            has_password = make_url(state.db).password is not None
        except Exception:
            has_password = True
        db = "" if has_password else f" --db {shlex.quote(state.db)}"
    flags = " --distributed" if distributed else ""
    return " && ".join(f"pxp{db} run --resume {shlex.quote(n)}{flags}" for n in names)


def report_paused(outcomes: list[RunOutcome], *, distributed: bool, study: str | None = None) -> bool:
    """A pause says exactly how to go on (docs/operations.md, Troubleshooting): one `paused:` line (per experiment,
    or per study) naming the paused repetitions and why, then one line with the real command; False if none paused."""
    paused = [o for o in outcomes if o.paused]
    if not paused:
        return False
    parts = []
    for o in paused:
        by_note: dict[str, list[int]] = {}
        for rep, note in sorted(o.paused.items()):
            by_note.setdefault(note or "not finished", []).append(rep)
        reps = "; ".join(f"repetition{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}: {why}"
                         for why, r in by_note.items())
        parts.append(f"{o.experiment} {reps}" if study is not None else reps)
    head = f"study {study}: " if study is not None else f"{paused[0].experiment} "
    err.print(f"paused: {head}{' | '.join(parts)}", highlight=False, markup=False, soft_wrap=True)
    err.print(f"resume with: {resume_command([o.experiment for o in paused], distributed=distributed)}",
              highlight=False, markup=False, soft_wrap=True)
    return True


def _paused_or_failed(e: Exception, engine: Any, what: str, hint: str) -> NoReturn:
    """A lost database pauses the run (exit 2, its one line and the resume line, docs/operations.md,
    Troubleshooting); anything else fails in one line; never a driver's text."""
    if is_database_error(e):
        err.print(f"paused: {fault_note(e, engine)}", highlight=False, markup=False, soft_wrap=True)
        err.print(hint, highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(2)
    fail(f"{what} ({user_message(e)}); {hint}")
