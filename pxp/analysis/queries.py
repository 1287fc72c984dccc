"""SQL over the stored sessions, messages and runs, shared by every analysis (DESIGN §2;
follow-up paper, Tab. 1 and Figs. 1–2): the page's Selection, the data-version cache, the
sessions' tag sequences packed in SQL and the filter options.

One GROUP BY packs each session's (sender, tag) sequence into integers (4 bits per message),
a second counts the sessions of each repetition per distinct packed sequence: a few thousand
rows however many messages are stored (pxp.analysis.tables reduces them to Table 1).

Results are cached per database and selection, keyed by a data version (the largest
message id, row counts and largest ids / update times of the tables read), so new
messages, closed or aborted sessions and new evaluations invalidate them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import BigInteger, Engine, Integer, and_, case, func, literal_column, select
from sqlalchemy import cast as cast_
from sqlalchemy.sql.elements import ColumnElement

from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.storage import core_tables as ct

#: the Core tables (pxp.storage.core_tables: no ORM, docs/development.md "Start-up")
S, M, R, IN, A, E, D = ct.session, ct.message, ct.run, ct.instance, ct.annotator, ct.experiment, ct.dataset
EV, LC = ct.evaluation, ct.llmcall

#: Group keys for side-by-side tables and breakdowns.
GROUP_BY = ("experiment", "annotator", "label", "dataset")


# --- Selection (the page's filters) --------------------------------------------------------


class AnalysisError(PxpError, ValueError):
    """An analysis asked for something pxp does not compute (a grouping, a format); one line."""


@dataclass(frozen=True)
class Selection:
    """Which sessions to count: empty tuples mean "all". Open sessions are never counted.

    Dates filter on the session's creation day, both ends inclusive. Several experiments in
    one selection are pooled repetition by repetition (repetition r = the union of their runs r).
    """

    experiments: tuple[int, ...] = ()
    datasets: tuple[int, ...] = ()
    repetitions: tuple[int, ...] = ()
    annotators: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None

    def needs_instance(self) -> bool:
        return bool(self.datasets or self.labels)


def where(sel: Selection) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = [S.c.status != "open"]
    if sel.experiments:
        conds.append(R.c.experiment_id.in_(sel.experiments))  # bounded: picked
    if sel.repetitions:
        conds.append(R.c.repetition.in_(sel.repetitions))  # bounded: picked
    if sel.annotators:
        conds.append(S.c.annotator_id.in_(sel.annotators))  # bounded: picked
    if sel.datasets:
        conds.append(IN.c.dataset_id.in_(sel.datasets))  # bounded: picked
    if sel.labels:
        conds.append(IN.c.label.in_(sel.labels))  # bounded: picked
    if sel.since is not None:
        conds.append(S.c.created_at >= datetime.combine(sel.since, time.min, tzinfo=UTC))
    if sel.until is not None:
        conds.append(S.c.created_at < datetime.combine(sel.until + timedelta(days=1), time.min, tzinfo=UTC))
    return conds


def _key_col(by: str | None) -> ColumnElement[Any]:
    if by is None:
        return literal_column("''").label("grp")
    if by == "experiment":
        return E.c.name.label("grp")
    if by == "annotator":
        return func.coalesce(A.c.name, "").label("grp")
    if by == "label":
        return IN.c.label.label("grp")
    if by == "dataset":
        return D.c.name.label("grp")
    raise AnalysisError(f"unknown grouping {by!r} (one of {', '.join(GROUP_BY)})")


def sessions_from(sel: Selection, by: str | None = None, *, instance: bool = False) -> Any:
    """session JOIN run, plus the tables the filters and the grouping need."""
    frm = S.join(R, R.c.id == S.c.run_id)
    if instance or sel.needs_instance() or by in ("label", "dataset"):
        frm = frm.join(IN, IN.c.id == S.c.instance_id)
    if by == "dataset":
        frm = frm.join(D, D.c.id == IN.c.dataset_id)
    if by == "experiment":
        frm = frm.join(E, E.c.id == R.c.experiment_id)
    if by == "annotator":
        frm = frm.outerjoin(A, A.c.id == S.c.annotator_id)
    return frm


# --- Cache keyed by data version -------------------------------------------------------------

_CACHE: OrderedDict[Hashable, tuple[tuple[Any, ...], Any]] = OrderedDict()
_CACHE_SIZE = 64
_lock = threading.Lock()
#: the entries being computed now, (key, version) -> (the computing thread, set once it is done)
_computing: dict[tuple[Hashable, tuple[Any, ...]], tuple[int, threading.Event]] = {}
T = TypeVar("T")


def data_version(engine: Engine) -> tuple[Any, ...]:
    """The data version analytics results are cached under (one cheap query).

    Messages are append-only, so the largest message id tells when new ones arrive; a
    session's status change (finished, aborted) moves session.updated_at; the other
    tables are small. Counts catch deletions of experiments, runs and sessions.
    """
    def sub(*cols: Any) -> Any:
        return select(*cols).scalar_subquery()

    q = select(
        sub(func.max(M.c.id)),
        sub(func.count(S.c.id)), sub(func.max(S.c.updated_at)), sub(func.max(S.c.id)),
        sub(func.count(EV.c.id)), sub(func.max(EV.c.id)),
        sub(func.count(LC.c.id)), sub(func.max(LC.c.id)),
        sub(func.count(R.c.id)), sub(func.count(E.c.id)), sub(func.max(E.c.id)),
        sub(func.count(A.c.id)), sub(func.max(IN.c.id)), sub(func.count(IN.c.id)),
    )
    with engine.connect() as c:
        return tuple(c.execute(q).one())


def _engine_key(engine: Engine) -> Hashable:
    url = engine.url.render_as_string(hide_password=True)
    return (url, id(engine)) if engine.url.database in (None, "", ":memory:") else url


_current: ContextVar[tuple[Any, ...] | None] = ContextVar("pxp_analytics_version", default=None)


def cached(engine: Engine, name: str, args: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per (database, name, args) and data version.

    Nested cached calls reuse the outer call's version, so one call costs one version query. A caller that
    finds the same entry being computed by another thread (the background warming, another visitor) waits
    for that result instead of computing it a second time in parallel.
    """
    key = (_engine_key(engine), name, args)
    outer = _current.get()
    version = outer if outer is not None else data_version(engine)
    while True:
        with _lock:
            hit = _CACHE.get(key)
            if hit is not None and hit[0] == version:
                _CACHE.move_to_end(key)
                return cast(T, hit[1])
            busy = _computing.get((key, version))
            if busy is None or busy[0] == threading.get_ident():
                mine = _computing[(key, version)] = (threading.get_ident(), threading.Event())
                break
        busy[1].wait()  # then read its result from the cache (or compute it, had it failed)
    token = _current.set(version)
    try:
        value = compute()
        with _lock:
            _CACHE[key] = (version, value)
            _CACHE.move_to_end(key)
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    finally:
        _current.reset(token)
        with _lock:
            if _computing.get((key, version)) is mine:
                del _computing[(key, version)]
        mine[1].set()
    return value


def clear_cache() -> None:
    with _lock:
        _CACHE.clear()


# --- Tag sequences packed in SQL ----------------------------------------------------------
#
# Each message becomes a 4-bit code (tag × 2 + 1 if the human sent it; INIT and unknown
# tags are 0) shifted to its place j, and SUM packs a session's messages into one BIGINT
# per 15 messages (bits never overlap, so SUM is an exact bitwise OR, on any database).
# Sessions are then counted per distinct packed sequence: a few thousand rows at most.

_CODES = {"RATIFY": 1, "REFUTE": 2, "REVISE": 3, "REJECT": 4}
_TAG_OF = {v: Tag(k) for k, v in _CODES.items()}
PER_WORD = 15


def packed_cols(words: int) -> list[Any]:
    tag = case(_CODES, value=M.c.tag, else_=0)  # a simple CASE: the tag is read once
    code = cast_(tag * 2 + cast_(M.c.sender == "human", Integer), BigInteger)
    cols = []
    for w in range(words):
        shifted: Any = code.op("<<")(4 * (M.c.j - 1 - PER_WORD * w))
        if words > 1:
            shifted = case((and_(M.c.j > PER_WORD * w, M.c.j <= PER_WORD * (w + 1)), shifted), else_=0)
        cols.append(func.coalesce(func.sum(shifted), 0).label(f"w{w}"))
    return cols


def words_for(n: int) -> int:
    return max(1, -(-n // PER_WORD))


_DECODE = [(Sender.HUMAN if code & 1 else Sender.MACHINE, _TAG_OF.get(code >> 1, Tag.INIT)) for code in range(16)]


def unpack(words: Sequence[int], length: int) -> tuple[tuple[Sender, Tag], ...]:
    """The (sender, tag) list of a session from its packed words and its number of messages."""
    out = []
    for w in range(-(-length // PER_WORD)):
        word = int(words[w]) if w < len(words) else 0
        for _ in range(min(PER_WORD, length - w * PER_WORD)):
            out.append(_DECODE[word & 15])
            word >>= 4
    return tuple(out)


@dataclass(frozen=True)
class SigRow:
    """Sessions of one group and repetition sharing status, stop reason and tag sequence."""

    group: str
    repetition: int
    status: str
    stop_reason: str | None
    tags: tuple[tuple[Sender, Tag], ...]
    sessions: int

    @property
    def length(self) -> int:
        return len(self.tags)


def signature_rows(engine: Engine, sel: Selection, by: str | None = None) -> list[SigRow]:
    """Per (group, repetition, status, stop reason, tag sequence): the number of sessions.

    Ungrouped, the rows per experiment pooled: one query serves Table 1 of experiments side by side and the
    views of their pooled sessions (transitions, lengths), from the same cache entry."""
    if by is None:
        return cached(engine, "signature_rows", (sel, None), lambda: _pooled(signature_rows(engine, sel, "experiment")))
    return cached(engine, "signature_rows", (sel, by), lambda: _signature_rows(engine, sel, by))


def _pooled(rows: list[SigRow]) -> list[SigRow]:
    counts: dict[tuple[Any, ...], int] = {}
    for r in rows:
        key = (r.repetition, r.status, r.stop_reason, r.tags)
        counts[key] = counts.get(key, 0) + r.sessions
    return [SigRow("", rep, status, stop, tags, n) for (rep, status, stop, tags), n in counts.items()]


def _signature_rows(engine: Engine, sel: Selection, by: str | None) -> list[SigRow]:
    words = words_for(bound(engine, sel))
    while True:
        rows = _signature_query(engine, sel, by, words)
        longest = max((r[-2] for r in rows), default=0)
        if longest <= words * PER_WORD:
            break
        words = words_for(longest)  # a session longer than its bound (imported non-conformant)
    out = []
    memo: dict[tuple[Any, ...], tuple[tuple[Sender, Tag], ...]] = {}
    for v in rows:
        key = v[4:-1]
        tags = memo.get(key)
        if tags is None:
            tags = memo[key] = unpack(v[4:4 + words], int(v[-2]))
        out.append(SigRow(
            group=str(v[0] if v[0] is not None else ""), repetition=int(v[1]), status=str(v[2]),
            stop_reason=v[3], tags=tags, sessions=int(v[-1]),
        ))
    return out


def _signature_query(engine: Engine, sel: Selection, by: str | None, words: int) -> list[tuple[Any, ...]]:
    key = _key_col(by)
    # grouped by session id alone: the session's own columns depend on its primary key, and
    # the one-row-per-session columns of other tables are taken with max() (cheaper than grouping)
    grp = key if by is None else func.max(key.element).label("grp")
    per_session = (
        select(
            grp, func.max(R.c.repetition).label("rep"), S.c.status.label("status"),
            S.c.stop_reason.label("stop"), *packed_cols(words), func.coalesce(func.max(M.c.j), 0).label("length"),
        )
        .select_from(sessions_from(sel, by).outerjoin(M, M.c.session_id == S.c.id))
        .where(*where(sel))
        .group_by(S.c.id)
        .subquery()
    )
    keys = [per_session.c[x] for x in ("grp", "rep", "status", "stop", *(f"w{w}" for w in range(words)), "length")]
    q = select(*keys, func.count().label("sessions")).group_by(*keys)
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(q)]



def bound(engine: Engine, sel: Selection) -> int:
    """The message bound n for the selection: the largest n of its experiments (10 if none)."""
    def compute() -> int:
        q = select(func.max(E.c.n))
        if sel.experiments:
            q = q.where(E.c.id.in_(sel.experiments))  # bounded: picked
        with engine.connect() as c:
            v = c.execute(q).scalar()
        return int(v) if v else 10

    return cached(engine, "bound", sel, compute)



# --- Filter options ---------------------------------------------------------------------------


@dataclass
class Options:
    """What the page's filters can offer."""

    experiments: list[dict[str, Any]]
    datasets: list[dict[str, Any]]
    annotators: list[dict[str, Any]]
    labels: list[str]
    repetitions: list[int]
    first_day: date | None
    last_day: date | None


def options(engine: Engine) -> Options:
    """Experiments, datasets, annotators, labels, repetitions and the date range in the database."""

    def compute() -> Options:
        with engine.connect() as c:
            ended = {int(e): int(n) for e, n in c.execute(  # sessions Table 1 counts, per experiment
                select(R.c.experiment_id, func.count()).select_from(S.join(R, R.c.id == S.c.run_id))
                .where(S.c.status != "open").group_by(R.c.experiment_id)
            ).all()}
            exps = [dict(r) | {"ended": int(ended.get(r["id"], 0))} for r in c.execute(
                select(E.c.id, E.c.name, E.c.task, E.c.mode, E.c.status, E.c.n, E.c.k).order_by(E.c.id)
            ).mappings()]
            dss = [dict(r) for r in c.execute(select(D.c.id, D.c.name, D.c.task).order_by(D.c.name)).mappings()]
            anns = [dict(r) for r in c.execute(select(A.c.id, A.c.name).order_by(A.c.name)).mappings()]
            labels = [str(x) for x in c.execute(
                select(IN.c.label).where(IN.c.label != "").distinct().order_by(IN.c.label)).scalars()]
            reps = [int(x) for x in c.execute(select(R.c.repetition).distinct().order_by(R.c.repetition)).scalars()]
            lo, hi = c.execute(select(func.min(S.c.created_at), func.max(S.c.created_at))).one()
        return Options(exps, dss, anns, labels, reps, _day(lo), _day(hi))

    return cached(engine, "options", (), compute)


def _day(v: Any) -> date | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    return datetime.fromisoformat(str(v)).date()

