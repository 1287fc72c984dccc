"""Abandoned live sessions: open sessions idle for a while, and taking one over (DESIGN §3).

A session abandoned by someone else can be taken over with a conditional UPDATE that
succeeds only while it is still open and idle, so when several people take over at once
exactly one wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.running import audit
from pxp.running.live.assignment import live_run
from pxp.storage.tables import Annotator, Instance, Message, Session, utcnow


@dataclass(frozen=True)
class AbandonedSession:
    """An open session nobody has touched for a while."""

    session_id: int
    ordinal: int
    instance_key: str
    annotator: str
    messages: int
    idle_minutes: int


def _last_activity(db: DB, s: Session) -> datetime:
    last = db.exec(select(func.max(Message.created_at)).where(Message.session_id == s.id)).one()
    times = [t for t in (s.updated_at, last) if t is not None]
    return max(_aware(t) for t in times)


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def abandoned_sessions(
    engine: Engine, *, experiment_id: int, idle_minutes: float = 30, exclude_annotator: int | None = None,
) -> list[AbandonedSession]:
    """Open sessions of other annotators idle for at least `idle_minutes`."""
    now = datetime.now(UTC)
    out = []
    with DB(engine) as db:
        _, run = live_run(db, experiment_id)
        rows = db.exec(
            select(Session, Instance.key, Annotator.name)
            .join(Instance, Instance.id == Session.instance_id)  # type: ignore[arg-type]
            .join(Annotator, Annotator.id == Session.annotator_id, isouter=True)  # type: ignore[arg-type]
            .where(Session.run_id == run.id, Session.status == "open")
            .order_by(Session.ordinal)  # type: ignore[arg-type]
        ).all()
        for s, key, who in rows:
            if exclude_annotator is not None and s.annotator_id == exclude_annotator:
                continue
            idle = now - _last_activity(db, s)
            if idle >= timedelta(minutes=idle_minutes):
                n_msgs = db.exec(select(func.count()).where(Message.session_id == s.id)).one()
                out.append(AbandonedSession(s.id or 0, s.ordinal, key, who or "nobody",
                                            int(n_msgs), int(idle.total_seconds() // 60)))
    return out


def take_over(
    engine: Engine, *, session_id: int, annotator_id: int, idle_minutes: float = 30,
) -> bool:
    """Resume an abandoned open session as this annotator (a conditional UPDATE).

    Succeeds only while the session is open and idle for `idle_minutes` (no update and
    no message since); the winner's update makes it active again, so when several
    people take over at once exactly one wins.
    """
    cutoff = datetime.now(UTC) - timedelta(minutes=idle_minutes)
    recent = select(Message.id).where(
        Message.session_id == session_id, col(Message.created_at) >= cutoff
    )
    with engine.begin() as conn:
        res = conn.execute(
            update(Session)
            .where(
                col(Session.id) == session_id,
                col(Session.status) == "open",
                col(Session.updated_at) < cutoff,
                ~recent.exists(),
            )
            .values(annotator_id=annotator_id, updated_at=utcnow())
        )
    if res.rowcount == 1:
        audit.took_over(engine, session_id, annotator_id)
    return bool(res.rowcount == 1)
