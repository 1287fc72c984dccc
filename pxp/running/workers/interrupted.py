"""Runs whose process ended without finishing or pausing (docs/operations.md, Troubleshooting): killed, a signal
pxp cannot catch (SIGKILL, SIGBUS), a power cut.

Such a run left its experiment "running" with a heartbeat that no longer moves (pxp.running.workers.pool): older
than STALE_SECONDS, or written by a process of this host that no longer exists. `pxp doctor`, `pxp run --resume`
and the Experiments page name it with the command that resumes it; every stored step stays, so the resume ends
with the tables of a run that was never interrupted.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.running.workers.pool import _aware, _dead_here, _fresh
from pxp.storage.core import marked_running
from pxp.storage.store import table_of
from pxp.storage.tables import Experiment


@dataclass(frozen=True)
class Interrupted:
    """One interrupted run: its experiment, when its process was last seen, and whether it waited for workers."""

    experiment_id: int
    name: str
    last_seen: datetime | None
    distributed: bool

    @property
    def resume(self) -> str:
        """The command that resumes it."""
        return f"pxp run --resume {shlex.quote(self.name)}" + (" --distributed" if self.distributed else "")

    def line(self) -> str:
        """'X was interrupted (last seen 2026-11-27 10:02 UTC): its process ended without finishing or pausing'."""
        seen = f" (last seen {self.last_seen:%Y-%m-%d %H:%M} UTC)" if self.last_seen is not None else ""
        return f"{self.name} was interrupted{seen}: its process ended without finishing or pausing"


def is_interrupted(exp: Experiment) -> bool:
    """Whether a stored experiment's run ended without finishing or pausing (see the module docstring)."""
    if exp.mode != "controlled" or exp.status != "running":
        return False
    # the heartbeat of the row at hand, not read again (one query for all the runs, not one a run)
    age = None if exp.heartbeat_at is None else (datetime.now(UTC) - _aware(exp.heartbeat_at)).total_seconds()
    return _dead_here(exp.worker) or not _fresh(age)


def interrupted_runs(engine: Engine) -> list[Interrupted]:
    """Every interrupted run of the database, oldest first."""
    with DB(engine) as db:
        running = db.exec(select(Experiment).where(marked_running(table_of(Experiment)))
                          .order_by(col(Experiment.id))).all()
    found = [e for e in running if is_interrupted(e)]
    queued: set[int] = set()
    if found and engine.dialect.name == "postgresql":
        from pxp.running.workers.queue import jobs_of

        with contextlib.suppress(Exception):  # no queue tables: nothing was distributed
            queued = set(jobs_of(engine, [e.id or 0 for e in found]))
    return [Interrupted(e.id or 0, e.name, e.heartbeat_at, (e.id or 0) in queued) for e in found]
