"""Background workers for controlled runs, outside the Streamlit script thread.

Each run is a child process (`python -m pxp.running.workers.pool <experiment id>`) calling
pxp.running.pxp.controlled.runner.run_experiment, so a browser rerun, a closed tab or a Streamlit restart
never interrupts it and Cancel can stop it at once. Progress is read from the
database only (DESIGN §3: the state is the stored messages), and a cancelled or
crashed run resumes from where it stopped, because every step is stored atomically.

The database, not server memory, says whether a worker runs: the worker claims the
experiment (Experiment.worker, "host:pid") with a conditional UPDATE and writes
Experiment.heartbeat_at every HEARTBEAT_SECONDS. A heartbeat younger than
STALE_SECONDS means "running", across server restarts and servers, and a second
worker is refused; a worker that sees its experiment cancelled stops itself.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, func, or_, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.errors import PxpError
from pxp.storage.tables import Experiment, Run, Session, utcnow

KEY_NAMES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 15.0

_lock = threading.Lock()
_procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
_logs: dict[tuple[str, int], Path] = {}


class WorkerError(PxpError, RuntimeError):
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


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def heartbeat_age(engine: Engine, experiment_id: int) -> float | None:
    """Seconds since the experiment's worker last wrote its heartbeat (None: no worker)."""
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None or exp.heartbeat_at is None:
            return None
        return (datetime.now(UTC) - _aware(exp.heartbeat_at)).total_seconds()


def _fresh(age: float | None) -> bool:
    return age is not None and age < STALE_SECONDS


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(engine: Engine, experiment_id: int, worker: str) -> bool:
    """Make `worker` the experiment's only worker, unless another has a fresh heartbeat."""
    now = utcnow()
    with engine.begin() as conn:
        res = conn.execute(
            update(Experiment)
            .where(col(Experiment.id) == experiment_id,
                   or_(col(Experiment.heartbeat_at).is_(None),
                       col(Experiment.heartbeat_at) < now - timedelta(seconds=STALE_SECONDS),
                       col(Experiment.worker) == worker))
            .values(worker=worker, heartbeat_at=now)
        )
    return bool(res.rowcount == 1)


def beat(engine: Engine, experiment_id: int, worker: str) -> str | None:
    """Write the worker's heartbeat; the experiment's status, or None if it lost the claim."""
    with engine.begin() as conn:
        res = conn.execute(
            update(Experiment)
            .where(col(Experiment.id) == experiment_id, col(Experiment.worker) == worker)
            .values(heartbeat_at=utcnow())
        )
    if res.rowcount != 1:
        return None
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        return None if exp is None else exp.status


def release(engine: Engine, experiment_id: int, worker: str | None = None) -> None:
    """Clear the experiment's worker and heartbeat (only `worker`'s, when given)."""
    cond = [col(Experiment.id) == experiment_id]
    if worker is not None:
        cond.append(col(Experiment.worker) == worker)
    with engine.begin() as conn:
        conn.execute(update(Experiment).where(*cond).values(worker=None, heartbeat_at=None))


def _dead_here(worker: str | None) -> bool:
    """Whether `worker` ("host:pid") was a process of this host that no longer exists (killed
    with SIGKILL, it could not release its claim): its heartbeat need not be waited out."""
    if not worker or ":" not in worker:
        return False
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def _release_dead(engine: Engine, experiment_id: int) -> None:
    """Clear the claim of a worker of this host that died without releasing it."""
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        worker = None if exp is None else exp.worker
    if _dead_here(worker):
        release(engine, experiment_id, worker)


def _already_running(engine: Engine, experiment_id: int, name: str) -> WorkerError | None:
    _release_dead(engine, experiment_id)
    age = heartbeat_age(engine, experiment_id)
    if not _fresh(age):
        return None
    return WorkerError(f"{name!r} is already running in another worker "
                       f"(heartbeat {age:.0f} s ago); cancel it first")


def start(engine: Engine, experiment_id: int, *, secrets: dict[str, str] | None = None) -> None:
    """Run (or resume) a controlled experiment in a child process.

    `secrets` are API keys from Streamlit secrets, passed to the child's environment
    only (never stored or logged). Starting an experiment this server already runs is
    a no-op; one another worker runs (a fresh heartbeat in the database, e.g. started
    before a server restart) raises WorkerError.
    """
    with DB(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is None:
            raise WorkerError(f"experiment {experiment_id} does not exist")
        if exp.mode != "controlled":
            raise WorkerError(f"{exp.name!r} is a live experiment; it runs in Annotate")
        name = exp.name
    key = (_url(engine), experiment_id)
    with _lock:
        proc = _procs.get(key)
        if proc is not None and proc.poll() is None:
            return
        busy = _already_running(engine, experiment_id, name)
        if busy is not None:
            raise busy
        env = dict(os.environ)
        for name, value in (secrets or {}).items():
            if name in KEY_NAMES and value and name not in env:
                env[name] = value
        env["PXP_DATABASE_URL"] = _url(engine)
        log = Path(tempfile.gettempdir()) / f"pxp-worker-{os.getpid()}-{experiment_id}.log"
        with log.open("wb") as fh:
            _procs[key] = subprocess.Popen(
                [sys.executable, "-m", "pxp.running.workers.pool", str(experiment_id)],
                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        _logs[key] = log
    _set_status(engine, experiment_id, "running")


def is_running(engine: Engine, experiment_id: int) -> bool:
    """Whether a worker runs the experiment: a fresh heartbeat in the database, or a
    child this server started that is alive (before its first heartbeat)."""
    with _lock:
        proc = _procs.get((_url(engine), experiment_id))
        if proc is not None and proc.poll() is None:
            return True
    return _fresh(heartbeat_age(engine, experiment_id))


def cancel(engine: Engine, experiment_id: int, *, timeout: float = 10) -> bool:
    """Stop the experiment's worker; stored steps are kept and the run can resume.

    A worker this server started is terminated at once; one started elsewhere (or
    before a restart) sees the "cancelled" status at its next heartbeat and stops.
    """
    key = (_url(engine), experiment_id)
    with _lock:
        proc = _procs.get(key)
    _set_status(engine, experiment_id, "cancelled")
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        release(engine, experiment_id)  # it cannot clear its own heartbeat once killed
        return True
    return _fresh(heartbeat_age(engine, experiment_id))


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
            .join(Run, col(Run.id) == col(Session.run_id))
            .where(Run.experiment_id == experiment_id)
            .group_by(Session.status)
        ).all():
            counts[status] = int(c)
        from pxp.storage.tables import Message

        msgs = db.exec(
            select(func.count()).select_from(Message)
            .join(Session, col(Session.id) == col(Message.session_id))
            .join(Run, col(Run.id) == col(Session.run_id))
            .where(Run.experiment_id == experiment_id)
        ).one()
        status = exp.status
    running = is_running(engine, experiment_id)
    if status == "running" and not running:
        status = "interrupted"  # its worker died without a word (killed, server lost)
    return Progress(
        experiment_id=experiment_id, status=status, sessions=sum(counts.values()),
        finished=counts.get("finished", 0), aborted=counts.get("aborted", 0),
        messages=int(msgs), running=running, error=last_error(engine, experiment_id),
    )


class Hold:
    """A claim on an experiment kept alive by a heartbeat thread (see `hold`)."""

    def __init__(self, engine: Engine, experiment_id: int, worker: str, on_cancel: int | Callable[[], None]) -> None:
        self.engine, self.experiment_id, self.worker = engine, experiment_id, worker
        self.on_cancel = on_cancel
        self.cancelled = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="pxp-heartbeat", daemon=True)

    def __enter__(self) -> Hold:
        with DB(self.engine) as db:
            exp = db.get(Experiment, self.experiment_id)
            name = exp.name if exp is not None else str(self.experiment_id)
        _release_dead(self.engine, self.experiment_id)
        if not claim(self.engine, self.experiment_id, self.worker):
            raise _already_running(self.engine, self.experiment_id, name) or WorkerError(
                f"{name!r} is already running in another worker; cancel it first")
        with self.engine.begin() as conn:  # a cancelled run taken up again is no longer cancelled
            conn.execute(update(Experiment)
                         .where(col(Experiment.id) == self.experiment_id, col(Experiment.status) == "cancelled")
                         .values(status="paused"))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=HEARTBEAT_SECONDS * 2)
        if self.cancelled:  # the run paused on the cancel; it stays marked as cancelled
            _set_status(self.engine, self.experiment_id, "cancelled")
        release(self.engine, self.experiment_id, self.worker)

    def _beat(self) -> None:
        """Write the heartbeat; signal this process when the experiment is cancelled or taken."""
        while not self._done.wait(HEARTBEAT_SECONDS):
            try:
                status = beat(self.engine, self.experiment_id, self.worker)
            except Exception:  # a busy database: try again at the next beat
                continue
            if status in (None, "cancelled"):
                self.cancelled = True
                release(self.engine, self.experiment_id, self.worker)
                if callable(self.on_cancel):
                    self.on_cancel()
                else:
                    os.kill(os.getpid(), self.on_cancel)
                return


def hold(engine: Engine, experiment_id: int, *, worker: str | None = None,
         on_cancel: int | Callable[[], None] = signal.SIGTERM) -> Hold:
    """Claim the experiment for this process and keep its heartbeat while the block runs.

    Entering raises WorkerError (one line) when another worker has a fresh heartbeat;
    leaving releases the claim. When the experiment is cancelled (or the claim is lost)
    the heartbeat thread sends `on_cancel` to this process: SIGTERM ends a worker child,
    SIGINT pauses an in-process `pxp run` as Ctrl-C does; a callable is called instead (a
    `--distributed` wait: a cancel is not a Ctrl-C). Used by the app's workers and `pxp run`.
    """
    return Hold(engine, experiment_id, worker or _worker_id(), on_cancel)


def main(argv: list[str] | None = None) -> int:
    """The child process: run_experiment(engine, id); errors end as one line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("error: usage: python -m pxp.running.workers.pool <experiment id>", flush=True)
        return 2
    experiment_id = int(args[0])
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.storage.store import get_engine

    engine = get_engine()
    held = hold(engine, experiment_id)
    try:
        held.__enter__()
    except WorkerError:
        print(f"error: experiment {experiment_id} is already running in another worker", flush=True)
        return 3
    try:
        run_experiment(engine, experiment_id)
    except Exception as err:
        msg = " ".join(str(err).split()) or type(err).__name__
        print(f"error: {msg}", flush=True)
        _set_status(engine, experiment_id, "failed")
        return 1
    finally:
        held.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
