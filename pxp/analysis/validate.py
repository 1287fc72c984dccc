"""`pxp validate`: the conformance check of DESIGN §1 over stored sessions, including the
match and changed facts its content decides where the task's MATCH is exact.

Each run's sessions are read in pages of pxp.storage.batches and each page's messages by the range of
its ordinals, so memory does not grow with the study (docs/development.md, "Reading a study"), through
SQLAlchemy Core without the ORM (docs/development.md, "Start-up"). A study repeats a few shapes of session: a
session whose `conformance_key` is one that conformed before conforms too, and only the others are checked
message by message; MATCH answers a pair of predictions it has seen from memory. Both memories are bounded and
emptied when full."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from pxp.protocols.pxp.facts import Row, Vouched, conformance_key, conformance_with_content, remembered
from pxp.protocols.pxp.rules import Msg, Sender, Tag, Violation
from pxp.storage import core_tables as ct
from pxp.storage.batches import page_rows, run_pages
from pxp.tasks.base import content_match
from pxp.tasks.registry import dataset_match_kind

#: the Core tables (pxp.storage.core_tables: no ORM, docs/development.md "Start-up")
_S, _R, _E, _I, _M, _D = ct.session, ct.run, ct.experiment, ct.instance, ct.message, ct.dataset


_Match = Callable[[str, str], bool | None]
_SENDER = {x.value: x for x in Sender}
_TAG = {x.value: x for x in Tag}


#: messages of conforming keys (pxp.protocols.pxp.facts.Vouched) kept before they are forgotten
KEY_MESSAGES = 50_000
#: characters of predictions whose MATCH is remembered (pxp.protocols.pxp.facts.remembered)
MATCH_CHARS = 2_000_000


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
    conforming: Vouched[bool] = Vouched(KEY_MESSAGES)
    matchers: dict[str, _Match | None] = {}  # MATCH by kind, remembering pairs of predictions
    with engine.connect() as conn:
        kinds = {d.id: dataset_match_kind(d.task, d.config) for d in conn.execute(select(_D.c.id, _D.c.task,
                                                                                        _D.c.config))}
        for run, page in run_pages(conn, runs, sessions):
            rows: dict[int, list[Row]] = {}
            read: list[Any] = page_rows(conn, run.id, page, _M, _M.c.session_id, _M.c.j, _M.c.sender, _M.c.tag,
                                        _M.c.prediction, _M.c.explanation, _M.c.match, _M.c.agree, _M.c.changed)
            for m in read:  # plain tuples: (ordinal, session, j, sender, ...)
                rows.setdefault(m[1], []).append(m[2:])
            del read
            sessions_of_page: list[Any] = page
            for ordinal, sid, n, k, status, dataset_id in sessions_of_page:
                kind = kinds.get(dataset_id, "text")
                if kind not in matchers:
                    matchers[kind] = remembered(content_match(kind), MATCH_CHARS)
                mine = rows.get(sid, [])
                key = (*conformance_key(mine, n, k, status, matchers[kind]), kind)
                if conforming.get(key):
                    continue
                found = conformance_with_content(
                    [Msg(j, _SENDER.get(sender) or Sender(sender), _TAG.get(tag) or Tag(tag), p, e, mt, a, c)
                     for j, sender, tag, p, e, mt, a, c in mine], n, k, status=status, match=matchers[kind])
                if not found:
                    conforming.put(key, True)
                out.extend(SessionViolation(run.name, run.repetition, sid, ordinal, v) for v in found)
            checked += len(page)
            del page, sessions_of_page, rows  # not held while the next page is read
    return checked, out
