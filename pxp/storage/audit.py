"""The audit trail (docs/operations.md "Login and roles"): who opened, answered, took over or
abandoned which session, and who created, started or cancelled an experiment, imported data or
saved settings, and when, as rows of the audit_event table.

pxp.running.pxp.live writes the session events (opened, answered, took over, abandoned) with
`write`, in the very transaction that stores what they record, so a crash leaves both or
neither; the app's other writes use `record` (its own transaction). The admins' Audit page
reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, insert
from sqlalchemy import select as sa_select
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.errors import PxpError
from pxp.storage.tables import Annotator, AuditEvent, Session, utcnow

#: session events (pxp.running.pxp.live) and the app's other writes: experiments, imports, settings
ACTIONS = ("opened", "answered", "took over", "abandoned", "refused", "created", "started", "cancelled",
           "imported", "saved settings")


class AuditError(PxpError, ValueError):
    """An audit action pxp does not record."""


def _annotator(conn: Connection, annotator_id: int | None, session_id: int | None) -> tuple[int | None, str]:
    """(annotator id, name): the given annotator, else the session's current one."""
    if annotator_id is None and session_id is not None:
        annotator_id = conn.execute(
            sa_select(col(Session.annotator_id)).where(col(Session.id) == session_id)
        ).scalar_one_or_none()
    name = None
    if annotator_id is not None:
        name = conn.execute(
            sa_select(col(Annotator.name)).where(col(Annotator.id) == annotator_id)
        ).scalar_one_or_none()
    return annotator_id, (name or "")


def write(
    conn: Connection, action: str, *, session_id: int | None = None, annotator_id: int | None = None,
    j: int | None = None, detail: str = "", actor: str | None = None,
) -> None:
    """One audit row inside the caller's transaction; the actor is the given annotator (else the
    session's annotator)."""
    if action not in ACTIONS:
        raise AuditError(f"unknown audit action {action!r}")
    aid, name = _annotator(conn, annotator_id, session_id)
    conn.execute(insert(AuditEvent).values(
        at=utcnow(), actor=(actor if actor is not None else name)[:320], annotator_id=aid,
        action=action, session_id=session_id, j=j, detail=detail,
    ))


def record(
    engine: Engine, action: str, *, session_id: int | None = None, annotator_id: int | None = None,
    j: int | None = None, detail: str = "", actor: str | None = None,
) -> None:
    """One audit row in a transaction of its own (for writes that are not session events)."""
    with engine.begin() as conn:
        write(conn, action, session_id=session_id, annotator_id=annotator_id, j=j, detail=detail, actor=actor)


def took_over(conn: Connection, session_id: int, annotator_id: int) -> None:
    """A take-over, in the take-over's transaction: the previous holder abandoned the session,
    this annotator took it over.

    The previous holder is the last one the trail saw open, answer or take over the session.
    """
    last = conn.execute(
        sa_select(col(AuditEvent.annotator_id), col(AuditEvent.actor)).where(
            col(AuditEvent.session_id) == session_id,
            col(AuditEvent.action).in_(("opened", "answered", "took over")),
        ).order_by(col(AuditEvent.id).desc()).limit(1)
    ).first()
    if last is not None and last[0] != annotator_id:
        write(conn, "abandoned", session_id=session_id, annotator_id=last[0], actor=last[1],
              detail="idle, then taken over")
    write(conn, "took over", session_id=session_id, annotator_id=annotator_id)


@dataclass(frozen=True)
class AuditRow:
    """One line of the admins' audit view."""

    at: datetime
    actor: str
    action: str
    session_id: int | None
    j: int | None
    detail: str


def audit_events(
    engine: Engine, *, actor: str | None = None, session_id: int | None = None, limit: int = 1000,
) -> list[AuditRow]:
    """The newest audit rows first, optionally of one actor or one session."""
    q = select(AuditEvent)
    if actor:
        q = q.where(AuditEvent.actor == actor)
    if session_id is not None:
        q = q.where(AuditEvent.session_id == session_id)
    with DB(engine) as db:
        rows = db.exec(q.order_by(col(AuditEvent.id).desc()).limit(limit)).all()
    return [AuditRow(r.at, r.actor, r.action, r.session_id, r.j, r.detail) for r in rows]


__all__ = ["ACTIONS", "AuditRow", "audit_events", "record", "took_over", "write"]
