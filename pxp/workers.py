"""Background workers for controlled runs, outside the Streamlit script thread.

Each run is a child process (`python -m pxp.workers <experiment id>`) calling
pxp.runner.run_experiment, so a browser rerun, a closed tab or a Streamlit restart
never interrupts it and Cancel can stop it at once. Progress is read from the
database only (DESIGN §3: the state is the stored messages), and a cancelled or
crashed run resumes from where it stopped, because every step is stored atomically.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, func
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.models import Experiment, Run, Session

KEY_NAMES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

_lock = threading.Lock()
_procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
_logs: dict[tuple[str, int], Path] = {}


class WorkerError(RuntimeError):
    """A worker that cannot start, in one line."""


@dataclass(frozen=True)
class Progress:
    """Progress of a controlled experiment, from the database."""

    experiment_id: int
    status: str
    sessions: int
    finished: int
    aborted: int
    messages: int
    running: bool
    error: str | None = None

    @property
    def done(self) -> int:
        return self.finished + self.aborted

    @property
    def fraction(self) -> float:
        return self.done / self.sessions if self.sessions else 0.0


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _set_status(engine: Engine, experiment_id: int, status: str) -> None:
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is not None:
            exp.status = status
            db.add(exp)
            db.commit()


def start(engine: Engine, experiment_id: int, *, secrets: dict[str, str] | None = None) -> None:
    """Run (or resume) a controlled experiment in a child process.

    `secrets` are API keys from Streamlit secrets, passed to the child's environment
    only (never stored or logged). Starting an experiment that already runs is a no-op.
    """
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise WorkerError(f"experiment {experiment_id} does not exist")
        if exp.mode != "controlled":
            raise WorkerError(f"{exp.name!r} is a live experiment; it runs in Annotate")
    key = (_url(engine), experiment_id)
    with _lock:
        proc = _procs.get(key)
        if proc is not None and proc.poll() is None:
            return
        env = dict(os.environ)
        for name, value in (secrets or {}).items():
            if name in KEY_NAMES and value and name not in env:
                env[name] = value
        env["PXP_DATABASE_URL"] = _url(engine)
        log = Path(tempfile.gettempdir()) / f"pxp-worker-{os.getpid()}-{experiment_id}.log"
        with log.open("wb") as fh:
            _procs[key] = subprocess.Popen(
                [sys.executable, "-m", "pxp.workers", str(experiment_id)],
                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        _logs[key] = log
    _set_status(engine, experiment_id, "running")


def is_running(engine: Engine, experiment_id: int) -> bool:
    """Whether this server started a worker for the experiment that is still alive."""
    with _lock:
        proc = _procs.get((_url(engine), experiment_id))
        return proc is not None and proc.poll() is None


def cancel(engine: Engine, experiment_id: int, *, timeout: float = 10) -> bool:
    """Stop the experiment's worker; stored steps are kept and the run can resume."""
    key = (_url(engine), experiment_id)
    with _lock:
        proc = _procs.get(key)
    stopped = False
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        stopped = True
    _set_status(engine, experiment_id, "cancelled")
    return stopped


def wait(engine: Engine, experiment_id: int, timeout: float | None = None) -> int | None:
    """Wait for the worker to end; its exit code (None if none was started here)."""
    with _lock:
        proc = _procs.get((_url(engine), experiment_id))
    return None if proc is None else proc.wait(timeout=timeout)


def last_error(engine: Engine, experiment_id: int) -> str | None:
    """The one-line error a failed worker printed last, if it failed."""
    key = (_url(engine), experiment_id)
    with _lock:
        proc, log = _procs.get(key), _logs.get(key)
    if proc is None or proc.poll() in (None, 0) or log is None or not log.exists():
        return None
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("error: "):
            return ln[len("error: "):]
    return "the worker stopped unexpectedly" if proc.returncode not in (-15, -9) else None


def progress(engine: Engine, experiment_id: int) -> Progress:
    """Sessions done and messages stored so far, read from the database."""
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise WorkerError(f"experiment {experiment_id} does not exist")
        counts: dict[str, int] = {}
        for status, c in db.exec(
            select(Session.status, func.count())
            .join(Run, Run.id == Session.run_id)  # type: ignore[arg-type]
            .where(Run.experiment_id == experiment_id)
            .group_by(Session.status)
        ).all():
            counts[status] = int(c)
        from pxp.models import Message

        msgs = db.exec(
            select(func.count()).select_from(Message)
            .join(Session, Session.id == Message.session_id)  # type: ignore[arg-type]
            .join(Run, Run.id == Session.run_id)  # type: ignore[arg-type]
            .where(Run.experiment_id == experiment_id)
        ).one()
        status = exp.status
    return Progress(
        experiment_id=experiment_id, status=status, sessions=sum(counts.values()),
        finished=counts.get("finished", 0), aborted=counts.get("aborted", 0),
        messages=int(msgs), running=is_running(engine, experiment_id),
        error=last_error(engine, experiment_id),
    )


def main(argv: list[str] | None = None) -> int:
    """The child process: run_experiment(engine, id); errors end as one line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("error: usage: python -m pxp.workers <experiment id>", flush=True)
        return 2
    experiment_id = int(args[0])
    from pxp.runner import run_experiment
    from pxp.store import get_engine

    engine = get_engine()
    try:
        run_experiment(engine, experiment_id)
    except Exception as err:
        msg = " ".join(str(err).split()) or type(err).__name__
        print(f"error: {msg}", flush=True)
        _set_status(engine, experiment_id, "failed")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
