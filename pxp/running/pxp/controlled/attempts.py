"""Sessions aborted for format: when they pause a run, and how a resume runs them again.

DESIGN §1 "Format failures": a session whose answers cannot be parsed is aborted with its
reason, and kept. A run whose sessions keep aborting for format (its first sessions in a row,
or more than half of them once there are enough) pauses like a provider fault instead of
finishing, with one line naming the model, the reason and the start of its last reply. Resuming
such a run archives each format-aborted session as an earlier attempt (session_attempt) and runs
it again from its start; the evaluations after the first of them are computed again.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import Engine, delete, insert, select, update
from sqlmodel import col

from pxp.agents.base import AgentUnavailable
from pxp.storage.tables import Context, Evaluation, Message, Probe, Session, SessionAttempt, utcnow
from pxp.tasks.spec import FORMAT_KINDS

#: a run pauses when its first FORMAT_STREAK sessions all abort for format ...
FORMAT_STREAK = 3
#: ... or, once FORMAT_WINDOW sessions are done, when more than half of them did
FORMAT_WINDOW = 10
#: the start of the note of a run paused for format failures (a resume re-runs those sessions)
FORMAT_NOTE = "format failures:"
_REASON = re.compile(r"^(?P<kind>[^:]+): (?:checker )?(?P<model>\S+) gave no .*?(?:; last reply: (?P<reply>.*))?$",
                     re.S)


#: the message fields an archived attempt keeps
_KEPT = ("j", "sender", "receiver", "tag", "prediction", "explanation", "match", "agree", "changed", "llm_call_id",
         "created_at")


class FormatFault(AgentUnavailable):
    """The run's sessions keep aborting for format: the repetition pauses (its note says why)."""


def format_kind(reason: str | None) -> str | None:
    """What an aborted session's reason says was wrong (pxp.tasks.spec.FORMAT_KINDS), or None when
    the abort was not a format failure."""
    if not reason:
        return None
    head = reason.split(":", 1)[0].strip()
    if head in FORMAT_KINDS:
        return head
    if "gave no usable answer" in reason or "gave no Yes/No answer" in reason:
        return "unusable answer"  # an abort stored before the reasons were named
    return None


def format_fault(kinds: Sequence[str | None], total: int) -> bool:
    """Whether the sessions done so far (in order: a format kind, or None) call for a pause:
    the first FORMAT_STREAK (or all of a shorter run) aborted for format, or more than half once
    FORMAT_WINDOW are done."""
    first = min(FORMAT_STREAK, total)
    if first and len(kinds) >= first and all(k is not None for k in kinds[:first]):
        return True
    aborted = sum(k is not None for k in kinds)
    return len(kinds) >= FORMAT_WINDOW and 2 * aborted > len(kinds)


def pause_note(kinds: Sequence[str | None], last_reason: str) -> str:
    """One line: the model, the reason and the first 120 characters of the last reply."""
    m = _REASON.match(" ".join(last_reason.split()))
    kind = format_kind(last_reason) or "format"
    model = m.group("model") if m else "the model"
    reply = (m.group("reply") or "''") if m else "''"
    aborted = sum(k is not None for k in kinds)
    common = Counter(k for k in kinds if k is not None).most_common(1)
    why = common[0][0] if common else kind
    return (f"{FORMAT_NOTE} {model} gave no usable answer ({why}) in {aborted} of the {len(kinds)} sessions so far; "
            f"last reply: {reply}; fix the model or server and resume to run those sessions again")


def retry_format_aborts(engine: Engine, run_id: int) -> int:
    """Archive every format-aborted session of the run as an earlier attempt and reopen it from its
    start; drop the evaluations from the first of them on (they are computed again). Returns how
    many sessions were reopened."""
    with engine.begin() as conn:
        rows = conn.execute(
            select(col(Session.id), col(Session.ordinal), col(Session.abort_reason))
            .where(col(Session.run_id) == run_id, col(Session.status) == "aborted")
        ).all()
        again = [(sid, ordinal, reason) for sid, ordinal, reason in rows if format_kind(reason) is not None]
        for sid, _, reason in again:
            msgs = conn.execute(
                select(*(col(getattr(Message, f)) for f in _KEPT)).where(col(Message.session_id) == sid)
                .order_by(col(Message.j))
            ).mappings().all()
            attempt = 1 + len(conn.execute(
                select(col(SessionAttempt.id)).where(col(SessionAttempt.session_id) == sid)).all())
            conn.execute(insert(SessionAttempt).values(
                session_id=sid, attempt=attempt, status="aborted", abort_reason=reason, created_at=utcnow(),
                messages=[{k: (v.isoformat() if k == "created_at" else v) for k, v in m.items()} for m in msgs],
            ))
            for table in (Probe, Context, Message):
                conn.execute(delete(table).where(col(table.session_id) == sid))
            conn.execute(update(Session).where(col(Session.id) == sid).values(
                status="open", abort_reason=None, stop_reason=None, context_kept=None, learn_note=None,
                learn_val_before=None, learn_val_after=None, updated_at=utcnow(),
            ))
        if again:
            first = min(ordinal for _, ordinal, _ in again)
            conn.execute(delete(Evaluation).where(col(Evaluation.run_id) == run_id,
                                                  col(Evaluation.after_session) >= first))
    return len(again)


__all__ = ["FORMAT_NOTE", "FormatFault", "format_fault", "format_kind", "pause_note", "retry_format_aborts"]
