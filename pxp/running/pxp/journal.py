"""Calls in flight: each LLM call is written to `llmcall_pending` when it is
sent, and removed in the transaction that stores its LLMCall row. After a crash the rows
left are the calls whose outcome is unknown; `pxp calls` counts them.

`step` (pxp.running.pxp.engine) sets where the calls of an agent's decision go with `journaled`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, Table, delete, insert, select

from pxp.llm.journal import recording
from pxp.storage.store import table_of
from pxp.storage.tables import PendingCall, utcnow

_P: Table = table_of(PendingCall)


class _PendingTable:
    """A CallJournal writing `llmcall_pending` rows under fixed ids."""

    def __init__(self, engine: Engine, ids: dict[str, Any]) -> None:
        self.engine, self.ids = engine, ids

    def sent(self, provider: str, model: str, purpose: str, attempt: int) -> int | None:
        with self.engine.begin() as conn:
            pk = conn.execute(insert(_P), {**self.ids, "provider": provider, "model": model, "purpose": purpose,
                                           "attempt": attempt, "sent_at": utcnow()}).inserted_primary_key
        return int(pk[0]) if pk is not None else None


@contextmanager
def journaled(engine: Engine, **ids: Any) -> Iterator[None]:
    """Journal the calls made inside the block under these ids (experiment, run, session, j)."""
    with recording(_PendingTable(engine, ids)):
        yield


def settle(conn: Connection, calls: Sequence[Any]) -> None:
    """Remove the pending rows of calls now stored as LLMCall rows (same transaction)."""
    ids = [c.pending_id for c in calls if getattr(c, "pending_id", None) is not None]
    if ids:
        conn.execute(delete(_P).where(_P.c.id.in_(ids)))  # bounded: one step's calls


def unknown_calls(engine: Engine, experiment_id: int) -> list[dict[str, Any]]:
    """The calls of an experiment whose outcome is unknown (sent, never stored), oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(_P).where(_P.c.experiment_id == experiment_id).order_by(_P.c.sent_at, _P.c.id))
        return [{"sent_at": r.sent_at.isoformat(timespec="seconds"), "run_id": r.run_id,
                 "session_id": r.session_id, "j": r.j, "provider": r.provider, "model": r.model,
                 "purpose": r.purpose, "attempt": r.attempt} for r in rows]
