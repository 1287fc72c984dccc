"""`pxp validate`: the conformance check of DESIGN §1 over stored sessions, including the
match and changed facts its content decides where the task's MATCH is exact."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.protocols.pxp.facts import conformance_with_content
from pxp.protocols.pxp.rules import Msg, Sender, Tag, Violation
from pxp.storage.store import db_session
from pxp.storage.tables import Dataset, Experiment, Instance, Message, Run, Session
from pxp.tasks.base import content_match
from pxp.tasks.registry import dataset_match_kind


@dataclass(frozen=True)
class SessionViolation:
    experiment: str
    repetition: int
    session_id: int
    ordinal: int
    violation: Violation

    def __str__(self) -> str:
        return f"{self.experiment} rep {self.repetition} session {self.session_id} (#{self.ordinal}): {self.violation}"


def validate(engine: Engine, *, experiment_id: int | None = None) -> tuple[int, list[SessionViolation]]:
    """Check every stored session (of one experiment, or all); returns (checked, violations)."""
    out: list[SessionViolation] = []
    with db_session(engine) as db:
        q = (
            select(Session, Run.repetition, Experiment.name, Instance.dataset_id)
            .join(Run, col(Run.id) == col(Session.run_id))
            .join(Experiment, col(Experiment.id) == col(Run.experiment_id))
            .join(Instance, col(Instance.id) == col(Session.instance_id))

        )
        if experiment_id is not None:
            q = q.where(Experiment.id == experiment_id)
        sessions = db.exec(q.order_by(col(Session.id))).all()
        ids = [row[0].id for row in sessions]
        msgs: dict[int, list[Msg]] = {}
        mq = select(Message).order_by(col(Message.session_id), col(Message.j))
        if experiment_id is not None:
            mq = mq.where(col(Message.session_id).in_(ids))
        for m in db.exec(mq).all():
            msgs.setdefault(m.session_id, []).append(
                Msg(m.j, Sender(m.sender), Tag(m.tag), m.prediction, m.explanation, m.match, m.agree, m.changed)
            )
        kinds = {d.id: dataset_match_kind(d.task, d.config) for d in db.exec(select(Dataset)).all()}
        for s, rep, name, dataset_id in sessions:
            kind = kinds.get(dataset_id, "text")
            for v in conformance_with_content(msgs.get(s.id or 0, []), s.n, s.k, status=s.status,
                                              match=content_match(kind)):
                out.append(SessionViolation(name, rep, s.id or 0, s.ordinal, v))
    return len(sessions), out
