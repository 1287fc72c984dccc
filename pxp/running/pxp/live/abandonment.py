"""Abandoned live sessions: open sessions idle for a while, and taking one over (DESIGN §3).

A session abandoned by someone else can be taken over with a conditional UPDATE that
succeeds only while it is still open and idle, so when several people take over at once
exactly one wins. The taker's Claim row is inserted in the same transaction, so nobody
takes over a case they were already served (docs/research.md, Live experiments and overlap), and the first annotator's
row
stays: who saw what is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.running.pxp.live.assignment import allowed_cases, case_number, live_run, overlap_of
from pxp.storage import audit
from pxp.storage.tables import Annotator, Claim, Experiment, Instance, Message, Run, Session, utcnow


@dataclass(frozen=True)
class AbandonedSession:
    """An open session nobody has touched for a while."""

    session_id: int
    #: the case's position in the queue (as the Annotate page numbers cases)
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
    """Open sessions of other annotators idle for at least `idle_minutes`.

    With `exclude_annotator`, also leaves out the cases that annotator was already served or
    may not be served (their case list).
    """
    now = datetime.now(UTC)
    out = []
    with DB(engine) as db:
        exp, run = live_run(db, experiment_id)
        overlap = overlap_of(exp)
        seen: set[int] = set()
        allowed: set[int] | None = None
        if exclude_annotator is not None:
            seen = set(db.exec(select(Claim.instance_id).where(
                Claim.run_id == run.id, Claim.annotator_id == exclude_annotator)).all())
            allowed = allowed_cases(db, exp, exclude_annotator)
        rows = db.exec(
            select(Session, Instance.key, Annotator.name)
            .join(Instance, col(Instance.id) == col(Session.instance_id))
            .join(Annotator, col(Annotator.id) == col(Session.annotator_id), isouter=True)
            .where(Session.run_id == run.id, Session.status == "open")
            .order_by(col(Session.ordinal))
        ).all()
        for s, key, who in rows:
            if exclude_annotator is not None and (
                s.annotator_id == exclude_annotator or s.instance_id in seen
                or (allowed is not None and s.instance_id not in allowed)
            ):
                continue
            idle = now - _last_activity(db, s)
            if idle >= timedelta(minutes=idle_minutes):
                n_msgs = db.exec(select(func.count()).where(Message.session_id == s.id)).one()
                out.append(AbandonedSession(s.id or 0, case_number(s.ordinal, overlap), key, who or "nobody",
                                            int(n_msgs), int(idle.total_seconds() // 60)))
    return out


def take_over(
    engine: Engine, *, session_id: int, annotator_id: int, idle_minutes: float = 30,
) -> bool:
    """Resume an abandoned open session as this annotator (a conditional UPDATE).

    Succeeds only while the session is open and idle for `idle_minutes` (no update and
    no message since); the winner's update makes it active again, so when several
    people take over at once exactly one wins. Refused (False) when this annotator was
    already served the case or it is not on their case list.
    """
    with DB(engine) as db:
        s = db.get(Session, session_id)
        run = db.get(Run, s.run_id) if s is not None else None
        exp = db.get(Experiment, run.experiment_id) if run is not None else None
        if s is None or exp is None:
            return False
        allowed = allowed_cases(db, exp, annotator_id) if exp.mode == "live" else None
        if allowed is not None and s.instance_id not in allowed:
            return False
        run_id, instance_id = s.run_id, s.instance_id
    cutoff = datetime.now(UTC) - timedelta(minutes=idle_minutes)
    recent = select(Message.id).where(
        Message.session_id == session_id, col(Message.created_at) >= cutoff
    )
    now = utcnow()
    try:
        with engine.begin() as conn:
            res = conn.execute(
                update(Session)
                .where(
                    col(Session.id) == session_id,
                    col(Session.status) == "open",
                    col(Session.updated_at) < cutoff,
                    ~recent.exists(),
                )
                .values(annotator_id=annotator_id, updated_at=now)
            )
            if res.rowcount != 1:
                return False
            conn.execute(insert(Claim).values(run_id=run_id, instance_id=instance_id,
                                              annotator_id=annotator_id, session_id=session_id,
                                              created_at=now))
            audit.took_over(conn, session_id, annotator_id)
    except IntegrityError:
        return False  # this annotator was already served the case: nothing changed
    return True
