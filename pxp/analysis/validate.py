"""`pxp validate`: the conformance check of DESIGN §1 over stored sessions, including the
match and changed facts its content decides where the task's MATCH is exact.

Sessions are read in keyset pages of pxp.storage.batches and each page's messages by the range of
its session ids, so memory does not grow with the study (docs/development.md, "Reading a study")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from pxp.protocols.pxp.facts import conformance_with_content
from pxp.protocols.pxp.rules import Msg, Sender, Tag, Violation
from pxp.storage.batches import pages
from pxp.storage.store import table_of
from pxp.storage.tables import Dataset, Experiment, Instance, Message, Run, Session
from pxp.tasks.base import content_match
from pxp.tasks.registry import dataset_match_kind

_S, _R, _E, _I, _M, _D = (table_of(t) for t in (Session, Run, Experiment, Instance, Message, Dataset))


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
    checked = 0
    runs = _S.join(_R, _R.c.id == _S.c.run_id)
    scope: list[Any] = [] if experiment_id is None else [_R.c.experiment_id == experiment_id]
    q = (select(_S.c.id, _S.c.n, _S.c.k, _S.c.status, _S.c.ordinal, _R.c.repetition, _E.c.name, _I.c.dataset_id)
         .select_from(runs.join(_E, _E.c.id == _R.c.experiment_id).join(_I, _I.c.id == _S.c.instance_id))
         .where(*scope))
    with engine.connect() as conn:
        kinds = {d.id: dataset_match_kind(d.task, d.config) for d in conn.execute(select(_D.c.id, _D.c.task,
                                                                                        _D.c.config))}
        for page in pages(conn, q, _S.c.id):
            msgs: dict[int, list[Msg]] = {}
            mq = (select(_M.c.session_id, _M.c.j, _M.c.sender, _M.c.tag, _M.c.prediction, _M.c.explanation,
                         _M.c.match, _M.c.agree, _M.c.changed)
                  .where(_M.c.session_id.between(page[0].id, page[-1].id)).order_by(_M.c.session_id, _M.c.j))
            if scope:  # only this experiment's sessions in the range
                mq = mq.select_from(_M.join(runs, _S.c.id == _M.c.session_id)).where(*scope)
            for m in conn.execute(mq):
                msgs.setdefault(m.session_id, []).append(
                    Msg(m.j, Sender(m.sender), Tag(m.tag), m.prediction, m.explanation, m.match, m.agree, m.changed))
            for s in page:
                kind = kinds.get(s.dataset_id, "text")
                for v in conformance_with_content(msgs.get(s.id, []), s.n, s.k, status=s.status,
                                                  match=content_match(kind)):
                    out.append(SessionViolation(s.name, s.repetition, s.id, s.ordinal, v))
            checked += len(page)
    return checked, out
