"""`pxp validate`: the conformance check of DESIGN §1 over stored sessions, including the
match and changed facts its content decides where the task's MATCH is exact.

Each run's sessions are read in pages of pxp.storage.batches and each page's messages by the range of
its ordinals, so memory does not grow with the study (docs/development.md, "Reading a study")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine, select

from pxp.protocols.pxp.facts import conformance_with_content
from pxp.protocols.pxp.rules import Msg, Sender, Tag, Violation
from pxp.storage.batches import page_rows, run_pages
from pxp.storage.store import table_of
from pxp.storage.tables import Dataset, Experiment, Instance, Message, Run, Session
from pxp.tasks.base import content_match
from pxp.tasks.registry import dataset_match_kind

_S, _R, _E, _I, _M, _D = (table_of(t) for t in (Session, Run, Experiment, Instance, Message, Dataset))


_Match = Callable[[str, str], bool | None]
_SENDER = {x.value: x for x in Sender}
_TAG = {x.value: x for x in Tag}


def _remembered(match: _Match | None) -> _Match | None:
    """`match` (a task's MATCH, pure) answering a pair it has seen from memory: a page's sessions repeat
    the same labels; dropped with the page."""
    if match is None:
        return None
    seen: dict[tuple[str, str], bool | None] = {}

    def remembered(a: str, b: str) -> bool | None:
        key = (a, b)
        if key not in seen:
            seen[key] = match(a, b)
        return seen[key]

    return remembered


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
    runs = (select(_R.c.id, _R.c.repetition, _E.c.name).join(_E, _E.c.id == _R.c.experiment_id)
            .where(*([] if experiment_id is None else [_R.c.experiment_id == experiment_id])).order_by(_R.c.id))
    sessions = (select(_S.c.ordinal, _S.c.id, _S.c.n, _S.c.k, _S.c.status, _I.c.dataset_id)
                .join(_I, _I.c.id == _S.c.instance_id))
    with engine.connect() as conn:
        kinds = {d.id: dataset_match_kind(d.task, d.config) for d in conn.execute(select(_D.c.id, _D.c.task,
                                                                                        _D.c.config))}
        for run, page in run_pages(conn, runs, sessions):
            msgs: dict[int, list[Msg]] = {}
            for m in page_rows(conn, run.id, page, _M, _M.c.session_id, _M.c.j, _M.c.sender, _M.c.tag,
                               _M.c.prediction, _M.c.explanation, _M.c.match, _M.c.agree, _M.c.changed):
                msgs.setdefault(m.session_id, []).append(
                    Msg(m.j, _SENDER.get(m.sender) or Sender(m.sender), _TAG.get(m.tag) or Tag(m.tag), m.prediction,
                        m.explanation, m.match, m.agree, m.changed))
            matchers: dict[str, _Match | None] = {}  # one page's MATCH results, by kind and pair of predictions
            for s in page:
                kind = kinds.get(s.dataset_id, "text")
                if kind not in matchers:
                    matchers[kind] = _remembered(content_match(kind))
                for v in conformance_with_content(msgs.get(s.id, []), s.n, s.k, status=s.status,
                                                  match=matchers[kind]):
                    out.append(SessionViolation(run.name, run.repetition, s.id, s.ordinal, v))
            checked += len(page)
            del page, msgs, matchers  # not held while the next page is read
    return checked, out
