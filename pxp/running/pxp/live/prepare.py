"""The next case, ready before the expert gets there (README "The app": the next case is prepared).

When an annotator is given a case, the machine's opening message (INIT) of their next case is
produced in the background: the next case is claimed for them (opened, with its audit row, as any
claim) and the machine's INIT is stored through the engine's one step, with the machine's context as
it is at that moment (live sessions carry no context across sessions, so nothing is waiting to
settle). A prepared session is the annotator's own open session: they are served it next; if they
leave, it is idle like any abandoned session and can be taken over. `depth` cases are kept ready
(default 1; 0 turns preparation off, the experiment's config "prepare").

No INIT is produced twice: every machine step of a live session runs under `session_lock`, a
PostgreSQL advisory lock held across app servers (a process-wide lock on SQLite, whose database
one server owns), so a page that reaches a session while its INIT is being prepared waits for it
instead of asking the machine again; the step itself then finds it is the human's turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, func, select, text
from sqlmodel import Session as DB
from sqlmodel import col

from pxp.agents.base import Agent
from pxp.running.pxp.engine import StepResult
from pxp.running.pxp.live.assignment import claim_new, live_run, prepare_of
from pxp.running.pxp.live.turns import machine_step
from pxp.storage.tables import Session

#: the advisory-lock namespace of live machine steps (the first key of pg_advisory_lock(int, int))
LOCK_SPACE = 0x5078
_locks: dict[tuple[str, int], threading.Lock] = {}
_guard = threading.Lock()


@contextmanager
def session_lock(engine: Engine, session_id: int) -> Iterator[None]:
    """Hold the session's machine-step lock: across servers on PostgreSQL, in this process on SQLite."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:a, :b)"), {"a": LOCK_SPACE, "b": session_id})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:a, :b)"), {"a": LOCK_SPACE, "b": session_id})
                conn.commit()
        return
    with _guard:
        lock = _locks.setdefault((str(engine.url), session_id), threading.Lock())
    with lock:
        yield


def machine_step_once(engine: Engine, session_id: int, machine: Agent) -> StepResult | None:
    """The machine's message if it is its turn, asked once even when several servers reach the session
    at the same time (the others wait, then find it is not the machine's turn)."""
    with session_lock(engine, session_id):
        return machine_step(engine, session_id, machine)


def prepare_depth(engine: Engine, experiment_id: int) -> int:
    """How many cases ahead the experiment prepares (its config's "prepare"; default 1, 0 = off)."""
    with DB(engine) as db:
        exp, _ = live_run(db, experiment_id)
    return prepare_of(exp)


def prepare_next(engine: Engine, *, experiment_id: int, annotator_id: int, machine: Agent,
                 depth: int | None = None, claimed: Callable[[int], None] | None = None) -> list[int]:
    """Claim and open the annotator's next `depth` cases beyond the one they hold, each with the
    machine's INIT stored; the ids prepared (empty when enough are ready or no case is left).
    `claimed(session_id)` runs once a case is claimed, before its INIT is asked (the app draws the
    case meanwhile, so a case whose INIT is stored is ready whole)."""
    want = 1 + (prepare_depth(engine, experiment_id) if depth is None else max(0, depth))
    prepared: list[int] = []
    while _held(engine, experiment_id, annotator_id) < want:
        sid = claim_new(engine, experiment_id=experiment_id, annotator_id=annotator_id)
        if sid is None:
            break
        if claimed is not None:
            claimed(sid)
        machine_step_once(engine, sid, machine)
        prepared.append(sid)
    return prepared


def _held(engine: Engine, experiment_id: int, annotator_id: int) -> int:
    """How many open sessions of the experiment the annotator holds."""
    with DB(engine) as db:
        _, run = live_run(db, experiment_id)
    q = select(func.count()).select_from(Session).where(
        col(Session.run_id) == run.id, col(Session.annotator_id) == annotator_id, col(Session.status) == "open")
    with engine.connect() as conn:
        return int(conn.execute(q).scalar_one())


__all__ = ["machine_step_once", "prepare_depth", "prepare_next", "session_lock"]
