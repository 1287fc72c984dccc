"""The audit trail (issue 13 §1): who opened, answered, took over or abandoned which session, and
who created, started or cancelled an experiment, imported data or saved settings, and when, as rows
of the audit_event table.

pxp.running.pxp.live calls these at each write (one line each); the admins' Audit page reads them.
An audit row is written after the write it records, in its own transaction: a failed audit
write never undoes an answer already stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, insert
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.errors import PxpError
from pxp.storage.tables import Annotator, AuditEvent, Session, utcnow

#: session events (pxp.running.pxp.live) and the app's other writes: experiments, imports, settings
ACTIONS = ("opened", "answered", "took over", "abandoned", "refused", "created", "started", "cancelled",
           "imported", "saved settings")


class AuditError(PxpError, ValueError):
    """An audit action pxp does not record."""


def _annotator(db: DB, annotator_id: int | None, session_id: int | None) -> tuple[int | None, str]:
    """(annotator id, name): the given annotator, else the session's current one."""
    if annotator_id is None and session_id is not None:
        s = db.get(Session, session_id)
        annotator_id = s.annotator_id if s is not None else None
    who = db.get(Annotator, annotator_id) if annotator_id is not None else None
    return annotator_id, (who.name if who is not None else "")


def record(
    engine: Engine, action: str, *, session_id: int | None = None, annotator_id: int | None = None,
    j: int | None = None, detail: str = "", actor: str | None = None,
) -> None:
    """One audit row; the actor is the given annotator (else the session's annotator)."""
    if action not in ACTIONS:
        raise AuditError(f"unknown audit action {action!r}")
    with DB(engine) as db:
        aid, name = _annotator(db, annotator_id, session_id)
    with engine.begin() as conn:
        conn.execute(insert(AuditEvent).values(
            at=utcnow(), actor=(actor if actor is not None else name)[:320], annotator_id=aid,
            action=action, session_id=session_id, j=j, detail=detail,
        ))


def took_over(engine: Engine, session_id: int, annotator_id: int) -> None:
    """A take-over: the previous holder abandoned the session, this annotator took it over.

    The previous holder is the last one the trail saw open, answer or take over the session.
    """
    with DB(engine) as db:
        last = db.exec(
            select(AuditEvent).where(
                AuditEvent.session_id == session_id,
                col(AuditEvent.action).in_(("opened", "answered", "took over")),
            ).order_by(col(AuditEvent.id).desc())
        ).first()
    if last is not None and last.annotator_id != annotator_id:
        record(engine, "abandoned", session_id=session_id, annotator_id=last.annotator_id,
               actor=last.actor, detail="idle, then taken over")
    record(engine, "took over", session_id=session_id, annotator_id=annotator_id)


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


__all__ = ["ACTIONS", "AuditRow", "audit_events", "record", "took_over"]
