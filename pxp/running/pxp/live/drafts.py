"""Drafts: an annotator's half-typed reply in a live session, kept until it is sent (README
"Annotate": nothing lost on reload). A draft is not a message: it never enters M or C.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.storage.tables import Draft, utcnow


def load_draft(engine: Engine, *, annotator_id: int, session_id: int, j: int) -> dict[str, Any] | None:
    """The fields of the draft of message j, or None (none, or one for another message)."""
    with DB(engine) as db:
        row = db.exec(select(Draft).where(Draft.annotator_id == annotator_id,
                                          Draft.session_id == session_id)).first()
        return dict(row.content) if row is not None and row.j == j else None


def save_draft(engine: Engine, *, annotator_id: int, session_id: int, j: int, content: dict[str, Any]) -> None:
    """Store the draft of message j (one per annotator and session; the newest wins)."""
    for _ in range(2):
        with DB(engine) as db:
            row = db.exec(select(Draft).where(Draft.annotator_id == annotator_id,
                                              Draft.session_id == session_id)).first()
            if row is None:
                row = Draft(annotator_id=annotator_id, session_id=session_id, j=j)
            row.j, row.content, row.updated_at = j, dict(content), utcnow()
            db.add(row)
            try:
                db.commit()
                return
            except IntegrityError:
                db.rollback()  # stored meanwhile by another tab: update that one


def discard_draft(engine: Engine, *, annotator_id: int, session_id: int) -> None:
    """Forget the annotator's draft in the session (its message was sent)."""
    with DB(engine) as db:
        db.execute(delete(Draft).where(col(Draft.annotator_id) == annotator_id,
                                       col(Draft.session_id) == session_id))
        db.commit()
