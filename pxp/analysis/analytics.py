"""Intelligibility analytics at scale: the papers' Table 1, Figures 1–2 and the views
researchers ask for (DESIGN §2; follow-up paper, Tab. 1 and Figs. 1–2).

Aggregation happens in SQL. One GROUP BY packs each session's (sender, tag) sequence
into integers (4 bits per message), a second counts the sessions of each repetition per
distinct packed sequence: a few thousand rows however many messages are stored. Each
distinct sequence is then reduced once to its signature (intelligibility.signature: the
first message at which each agent sent a positive tag, a REJECT, a negative tag, any
tag, a REVISE); every Definition 1–2 property of a session cut to its first j messages
is true exactly on an interval of j (intelligibility.metric_intervals), so Table 1
(whole sessions) and Figure 1 (j = 1..n) follow without a message in Python. The
repetitions are aggregated by intelligibility.aggregate, as on the pure reference path.

Results are cached per database and selection, keyed by a data version (the largest
message id, row counts and largest ids / update times of the tables read), so new
messages, closed or aborted sessions and new evaluations invalidate them.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from itertools import accumulate
from typing import Any, TypeVar, cast

import pandas as pd
from sqlalchemy import BigInteger, Engine, Integer, Table, and_, case, func, literal_column, or_, select
from sqlalchemy import cast as cast_
from sqlalchemy.sql.elements import ColumnElement

from pxp.protocols.pxp.intelligibility import (
    METRICS,
    RepetitionCounts,
    Table1,
    aggregate,
    cohen_kappa,
    in_interval,
    metric_intervals,
    signature,
    signature_flags,
    table1_rows,
)
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.storage.tables import (
    Annotator,
    Dataset,
    Evaluation,
    Experiment,
    Instance,
    LLMCall,
    Message,
    Run,
    Session,
)


def _t(model: type[Any]) -> Table:
    return cast(Table, model.__table__)


S, M, R, IN, A, E, D = (_t(x) for x in (Session, Message, Run, Instance, Annotator, Experiment, Dataset))
EV, LC = _t(Evaluation), _t(LLMCall)

#: Group keys for side-by-side tables and breakdowns.
GROUP_BY = ("experiment", "annotator", "label", "dataset")


# --- Selection (the page's filters) --------------------------------------------------------


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


def _where(sel: Selection) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = [S.c.status != "open"]
    if sel.experiments:
        conds.append(R.c.experiment_id.in_(sel.experiments))
    if sel.repetitions:
        conds.append(R.c.repetition.in_(sel.repetitions))
    if sel.annotators:
        conds.append(S.c.annotator_id.in_(sel.annotators))
    if sel.datasets:
        conds.append(IN.c.dataset_id.in_(sel.datasets))
    if sel.labels:
        conds.append(IN.c.label.in_(sel.labels))
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
    raise ValueError(f"unknown grouping {by!r} (one of {', '.join(GROUP_BY)})")


def _sessions_from(sel: Selection, by: str | None = None, *, instance: bool = False) -> Any:
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

    Nested cached calls reuse the outer call's version, so one call costs one version query.
    """
    key = (_engine_key(engine), name, args)
    outer = _current.get()
    version = outer if outer is not None else data_version(engine)
    with _lock:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == version:
            _CACHE.move_to_end(key)
            return cast(T, hit[1])
    token = _current.set(version)
    try:
        value = compute()
    finally:
        _current.reset(token)
    with _lock:
        _CACHE[key] = (version, value)
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
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
_PER_WORD = 15


def _packed_cols(words: int) -> list[Any]:
    tag = case(_CODES, value=M.c.tag, else_=0)  # a simple CASE: the tag is read once
    code = cast_(tag * 2 + cast_(M.c.sender == "human", Integer), BigInteger)
    cols = []
    for w in range(words):
        shifted: Any = code.op("<<")(4 * (M.c.j - 1 - _PER_WORD * w))
        if words > 1:
            shifted = case((and_(M.c.j > _PER_WORD * w, M.c.j <= _PER_WORD * (w + 1)), shifted), else_=0)
        cols.append(func.coalesce(func.sum(shifted), 0).label(f"w{w}"))
    return cols


def _words_for(n: int) -> int:
    return max(1, -(-n // _PER_WORD))


_DECODE = [(Sender.HUMAN if code & 1 else Sender.MACHINE, _TAG_OF.get(code >> 1, Tag.INIT)) for code in range(16)]


def unpack(words: Sequence[int], length: int) -> tuple[tuple[Sender, Tag], ...]:
    """The (sender, tag) list of a session from its packed words and its number of messages."""
    out = []
    for w in range(-(-length // _PER_WORD)):
        word = int(words[w]) if w < len(words) else 0
        for _ in range(min(_PER_WORD, length - w * _PER_WORD)):
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
    """Per (group, repetition, status, stop reason, tag sequence): the number of sessions."""
    return cached(engine, "signature_rows", (sel, by), lambda: _signature_rows(engine, sel, by))


def _signature_rows(engine: Engine, sel: Selection, by: str | None) -> list[SigRow]:
    words = _words_for(bound(engine, sel))
    while True:
        rows = _signature_query(engine, sel, by, words)
        longest = max((r[-2] for r in rows), default=0)
        if longest <= words * _PER_WORD:
            break
        words = _words_for(longest)  # a session longer than its bound (imported non-conformant)
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
            S.c.stop_reason.label("stop"), *_packed_cols(words), func.coalesce(func.max(M.c.j), 0).label("length"),
        )
        .select_from(_sessions_from(sel, by).outerjoin(M, M.c.session_id == S.c.id))
        .where(*_where(sel))
        .group_by(S.c.id)
        .subquery()
    )
    keys = [per_session.c[x] for x in ("grp", "rep", "status", "stop", *(f"w{w}" for w in range(words)), "length")]
    q = select(*keys, func.count().label("sessions")).group_by(*keys)
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(q)]


# --- Table 1 and Figure 1 --------------------------------------------------------------------


def repetition_counts(rows: Sequence[SigRow], n: int) -> dict[str, dict[int, RepetitionCounts]]:
    """RepetitionCounts per group and repetition from signature rows (aborted: never intelligible).

    A property true on [lo, hi) adds the sessions at lo and removes them at hi in a difference
    array; a running sum then gives the count at every bound j = 1..n.
    """
    acc: dict[tuple[str, int], tuple[list[int], dict[str, int], dict[str, list[int]]]] = {}
    memo: dict[tuple[tuple[Sender, Tag], ...], list[tuple[str, int, int, bool]]] = {}
    for r in rows:
        a = acc.get((r.group, r.repetition))
        if a is None:
            a = acc[(r.group, r.repetition)] = ([0, 0], dict.fromkeys(METRICS, 0),
                                                {name: [0] * (n + 2) for name in METRICS})
        a[0][0] += r.sessions
        if r.status == "aborted":
            a[0][1] += r.sessions
            continue
        spans = memo.get(r.tags)
        if spans is None:
            spans = memo[r.tags] = _spans(r.tags, n)
        for name, lo, hi, whole in spans:
            if whole:
                a[1][name] += r.sessions
            if lo < hi:
                a[2][name][lo] += r.sessions
                a[2][name][hi] -= r.sessions
    out: dict[str, dict[int, RepetitionCounts]] = defaultdict(dict)
    for (group, rep), (tot, metrics, diff) in acc.items():
        by_message = {name: list(accumulate(d))[1:n + 1] for name, d in diff.items()}
        out[group][rep] = RepetitionCounts(tot[0], tot[1], metrics, by_message)
    return dict(out)


def _spans(tags: tuple[tuple[Sender, Tag], ...], n: int) -> list[tuple[str, int, int, bool]]:
    """(metric, lo, hi, whole-session flag) with lo..hi clipped to the bounds 1..n+1."""
    out = []
    for name, iv in metric_intervals(signature(tags)).items():
        lo, hi = iv
        whole = in_interval(iv)
        if lo is None:
            out.append((name, 0, 0, whole))
            continue
        out.append((name, min(max(lo, 1), n + 1), min(hi if hi is not None else n + 1, n + 1), whole))
    return out


def bound(engine: Engine, sel: Selection) -> int:
    """The message bound n for the selection: the largest n of its experiments (10 if none)."""
    def compute() -> int:
        q = select(func.max(E.c.n))
        if sel.experiments:
            q = q.where(E.c.id.in_(sel.experiments))
        with engine.connect() as c:
            v = c.execute(q).scalar()
        return int(v) if v else 10

    return cached(engine, "bound", sel, compute)


def table1(engine: Engine, sel: Selection, *, n: int | None = None) -> Table1:
    """Table 1 and the Figure 1 curves for the selection, median over its repetitions."""
    return table1_by(engine, sel, None, n=n).get("", aggregate([], n or bound(engine, sel)))


def table1_by(engine: Engine, sel: Selection, by: str | None, *, n: int | None = None) -> dict[str, Table1]:
    """Table 1 per group (experiment, annotator, label or dataset), each over its repetitions.

    A repetition counts for a group when the group has at least one finished or aborted
    session in it.
    """
    n = n or bound(engine, sel)

    def compute() -> dict[str, Table1]:
        reps = repetition_counts(signature_rows(engine, sel, by), n)
        return {g: aggregate([rc[r] for r in sorted(rc)], n) for g, rc in sorted(reps.items())}

    return cached(engine, "table1_by", (sel, by, n), compute)


def figure1_frame(t: Table1, name: str = "") -> pd.DataFrame:
    """Figure 1's data: per metric and bound j, the median, min and max over repetitions."""
    recs = []
    for metric in METRICS:
        for j, med in enumerate(t.by_message.get(metric, []), start=1):
            recs.append({
                "group": name, "metric": metric, "j": j, "median": med,
                "min": t.by_message_min[metric][j - 1], "max": t.by_message_max[metric][j - 1],
            })
    return pd.DataFrame(recs, columns=["group", "metric", "j", "median", "min", "max"])


def table1_frame(tables: dict[str, Table1]) -> pd.DataFrame:
    """The papers' Table 1 layout: rows = counts, one column per group, `count (proportion)`."""
    cols: dict[str, list[str]] = {}
    ranges: dict[str, list[str]] = {}
    labels: list[str] = []
    for name, t in tables.items():
        body = table1_rows(t.as_json(name))
        labels = [a for a, _, _ in body] + ["Aborted sessions (apart)"]
        cols[name] = [b for _, b, _ in body] + [str(t.as_json(name)["aborted_sessions"])]
        ranges[name] = [c for _, _, c in body] + [""]
    df = pd.DataFrame({"Count": labels})
    for name in tables:
        df[name] = cols[name]
        if tables[name].repetitions > 1:
            df[f"{name} min–max"] = ranges[name]
    return df


def repetition_frame(engine: Engine, sel: Selection, by: str | None = None) -> pd.DataFrame:
    """Per group and repetition: total, aborted and the seven counts (what the medians are of)."""
    rows = signature_rows(engine, sel, by)
    n = bound(engine, sel)
    recs = []
    for group, reps in sorted(repetition_counts(rows, n).items()):
        for rep, rc in sorted(reps.items()):
            recs.append({"group": group, "repetition": rep, "total_sessions": rc.total_sessions,
                         "aborted_sessions": rc.aborted_sessions, **rc.metrics})
    return pd.DataFrame(recs, columns=["group", "repetition", "total_sessions", "aborted_sessions", *METRICS])


def breakdown_frame(tables: dict[str, Table1], name: str = "group") -> pd.DataFrame:
    """One row per group (label, annotator...): median total, aborted, and each metric's count and proportion."""
    recs = []
    for g, t in tables.items():
        rec: dict[str, Any] = {name: g, "repetitions": t.repetitions, "total_sessions": t.total_sessions,
                               "aborted_sessions": t.aborted_sessions}
        for m in METRICS:
            rec[m] = t.metrics[m].count
            rec[f"{m} (proportion)"] = round(t.metrics[m].proportion, 4)
        recs.append(rec)
    cols = [name, "repetitions", "total_sessions", "aborted_sessions",
            *[c for m in METRICS for c in (m, f"{m} (proportion)")]]
    return pd.DataFrame(recs, columns=cols)


SHORT_LABELS = {
    "one_way_human": "1-way Human", "one_way_machine": "1-way Machine", "two_way": "2-way",
    "strong_human": "Strong Human", "strong_machine": "Strong Machine",
    "ultra_strong_human": "Ultra-Strong Human", "ultra_strong_machine": "Ultra-Strong Machine",
}


def breakdown_display(df: pd.DataFrame) -> pd.DataFrame:
    """breakdown_frame for reading: `count (proportion)` cells under short Table 1 labels."""
    out = df.iloc[:, :4].copy()
    out.columns = [df.columns[0], "repetitions", "total sessions", "aborted"]
    for m in METRICS:
        out[SHORT_LABELS[m]] = [f"{_fmt_num(c)} ({p:.2f})" for c, p in zip(df[m], df[f"{m} (proportion)"],
                                                                           strict=True)]
    return out


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def plain(text: str) -> str:
    """A name safe for plotly, which reads <b>, <a href> ... in trace names as markup."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def session_lengths(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Session length distribution: sessions per (messages, status, stop reason)."""
    agg: dict[tuple[int, str, str], int] = defaultdict(int)
    for r in signature_rows(engine, sel):
        agg[(r.length, r.status, r.stop_reason or "")] += r.sessions
    return pd.DataFrame(
        [{"messages": k[0], "status": k[1], "stop_reason": k[2], "sessions": v} for k, v in sorted(agg.items())],
        columns=["messages", "status", "stop_reason", "sessions"],
    )


# --- Per-session flags (downloads) ------------------------------------------------------------


def session_frame(engine: Engine, sel: Selection) -> pd.DataFrame:
    """One row per finished or aborted session with its seven Table 1 flags (vectorised)."""
    return cached(engine, "session_frame", sel, lambda: _session_frame(engine, sel)).copy()


def _session_frame(engine: Engine, sel: Selection) -> pd.DataFrame:
    words = _words_for(bound(engine, sel))
    cols = [
        S.c.id.label("session_id"), E.c.name.label("experiment"), R.c.repetition, S.c.ordinal,
        IN.c.key.label("instance"), IN.c.label, A.c.name.label("annotator"), S.c.status,
        S.c.stop_reason, S.c.created_at,
    ]
    names = [x.name for x in cols]
    while True:
        wnames = [f"w{w}" for w in range(words)]
        packed = (
            select(S.c.id.label("sid"), *_packed_cols(words), func.coalesce(func.max(M.c.j), 0).label("messages"))
            .select_from(_sessions_from(sel).outerjoin(M, M.c.session_id == S.c.id))
            .where(*_where(sel)).group_by(S.c.id).subquery()
        )
        frm = (
            packed.join(S, S.c.id == packed.c.sid).join(R, R.c.id == S.c.run_id)
            .join(E, E.c.id == R.c.experiment_id).join(IN, IN.c.id == S.c.instance_id)
            .outerjoin(A, A.c.id == S.c.annotator_id)
        )
        q = (
            select(*cols, *(packed.c[w] for w in wnames), packed.c.messages).select_from(frm)
            .order_by(E.c.name, R.c.repetition, S.c.ordinal)
        )
        with engine.connect() as c:
            df = pd.DataFrame([tuple(r) for r in c.execute(q)], columns=[*names, *wnames, "messages"])
        longest = int(df["messages"].max()) if len(df) else 0
        if longest <= words * _PER_WORD:
            break
        words = _words_for(longest)
    memo: dict[tuple[Any, ...], dict[str, bool]] = {}
    flags: list[dict[str, bool]] = []
    for key in zip(*(df[w] for w in wnames), df["messages"], strict=True):
        f = memo.get(key)
        if f is None:
            f = memo[key] = signature_flags(signature(unpack(key[:-1], int(key[-1]))))
        flags.append(f)
    fl = pd.DataFrame(flags, columns=list(METRICS), index=df.index, dtype=bool)
    live = (df["status"] != "aborted").to_numpy()
    for name in METRICS:
        df[name] = fl[name].to_numpy() & live
    return df.drop(columns=wnames)


def to_parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


# --- Tag transitions --------------------------------------------------------------------------


def tag_transitions(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Which tag answers which: counts of (message j−1 sender and tag) → (message j sender and tag).

    Read off the packed sequences Table 1 is computed from (no extra pass over the messages).
    """

    def compute() -> pd.DataFrame:
        agg: dict[tuple[str, str, str, str], int] = defaultdict(int)
        for r in signature_rows(engine, sel):
            for (s1, t1), (s2, t2) in zip(r.tags, r.tags[1:], strict=False):
                agg[(s1.value, t1.value, s2.value, t2.value)] += r.sessions
        return pd.DataFrame([(*k, v) for k, v in sorted(agg.items())],
                            columns=["from_sender", "from_tag", "to_sender", "to_tag", "count"])

    return cached(engine, "tag_transitions", sel, compute).copy()


def transition_matrix(df: pd.DataFrame) -> pd.DataFrame:
    """Rows "sender TAG" of message j−1, columns the tag that answered it (message j)."""
    order = ["INIT", "RATIFY", "REFUTE", "REVISE", "REJECT"]
    if df.empty:
        return pd.DataFrame(0, index=[], columns=order[1:])
    d = df.assign(answered=df.from_sender + " " + df.from_tag)
    mat = d.pivot_table(index="answered", columns="to_tag", values="count", aggfunc="sum", fill_value=0)
    cols = [c for c in order if c in mat.columns] + [c for c in mat.columns if c not in order]
    idx = sorted(mat.index, key=lambda s: (order.index(s.split(" ")[1]) if s.split(" ")[1] in order else 99, s))
    return mat.loc[idx, cols].astype(int)


# --- Figure 2: machine performance ------------------------------------------------------------


def evaluations(engine: Engine, sel: Selection, split: str = "test") -> pd.DataFrame:
    """Evaluation rows (machine performance after each session) for the selection's runs."""

    def compute() -> pd.DataFrame:
        frm = EV.join(R, R.c.id == EV.c.run_id).join(E, E.c.id == R.c.experiment_id)
        conds = [EV.c.split == split]
        if sel.experiments:
            conds.append(R.c.experiment_id.in_(sel.experiments))
        if sel.repetitions:
            conds.append(R.c.repetition.in_(sel.repetitions))
        q = (
            select(E.c.name.label("experiment"), R.c.repetition, EV.c.after_session,
                   EV.c.prediction_accuracy.label("prediction"),
                   EV.c.explanation_accuracy.label("explanation"), EV.c.both_accuracy.label("both"),
                   EV.c.instances)
            .select_from(frm).where(*conds).order_by(E.c.name, R.c.repetition, EV.c.after_session)
        )
        with engine.connect() as c:
            return pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "experiment", "repetition", "after_session", "prediction", "explanation", "both", "instances"])

    return cached(engine, "evaluations", (sel, split), compute).copy()


PERFORMANCE = ("prediction", "explanation", "both")


def performance_median(df: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions of each accuracy, per experiment and sessions processed.

    As in pxp.running.evaluate.performance_series: a run is evaluated only after the sessions whose
    context it kept, so its performance after session i is its latest evaluation at or before i.
    """
    cols = ["experiment", "after_session", *PERFORMANCE, *(f"{m}_{a}" for a in ("min", "max") for m in PERFORMANCE)]
    if df.empty:
        return pd.DataFrame(columns=cols)
    from pxp.running.evaluate import Score, carry_forward

    out = []
    for exp, d in df.groupby("experiment", sort=True):
        per_run = {
            rep: [(int(r.after_session), Score(r.prediction, r.explanation, r.both, int(r.instances)))
                  for r in dr.itertuples()]
            for rep, dr in d.groupby("repetition")
        }
        points, agg = carry_forward(per_run)
        res = pd.DataFrame({"experiment": exp, "after_session": points})
        for m in PERFORMANCE:
            res[m] = agg["median"][m]
            res[f"{m}_min"] = agg["min"][m]
            res[f"{m}_max"] = agg["max"][m]
        out.append(res)
    return pd.concat(out, ignore_index=True)[cols]


# --- LLM cost and latency ---------------------------------------------------------------------


def llm_costs(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Per session: LLM calls, tokens, cost and latency (sums over its calls)."""

    def compute() -> pd.DataFrame:
        frm = _sessions_from(sel).join(E, E.c.id == R.c.experiment_id).join(LC, LC.c.session_id == S.c.id)
        keys = [S.c.id.label("session_id"), E.c.name.label("experiment"), R.c.repetition, S.c.ordinal]
        q = (
            select(*keys, func.count(LC.c.id).label("calls"),
                   func.sum(LC.c.tokens_in).label("tokens_in"), func.sum(LC.c.tokens_out).label("tokens_out"),
                   func.sum(LC.c.cache_read).label("cache_read"),
                   func.sum(LC.c.cost_usd).label("cost_usd"), func.sum(LC.c.latency_ms).label("latency_ms"),
                   func.max(LC.c.latency_ms).label("max_call_latency_ms"),
                   func.sum(case((LC.c.error.is_not(None), 1), else_=0)).label("errors"))
            .select_from(frm).where(*_where(sel)).group_by(*keys).order_by(E.c.name, R.c.repetition, S.c.ordinal)
        )
        with engine.connect() as c:
            df = pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "session_id", "experiment", "repetition", "ordinal", "calls", "tokens_in", "tokens_out",
                "cache_read", "cost_usd", "latency_ms", "max_call_latency_ms", "errors"])
        return df

    return cached(engine, "llm_costs", sel, compute).copy()


def llm_summary(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Totals per provider, model and purpose for the selection's experiments (all calls)."""

    def compute() -> pd.DataFrame:
        frm = LC.outerjoin(R, R.c.id == LC.c.run_id)
        conds: list[ColumnElement[bool]] = []
        if sel.experiments:
            conds.append(LC.c.experiment_id.in_(sel.experiments))
        if sel.repetitions:
            conds.append(or_(R.c.repetition.in_(sel.repetitions), LC.c.run_id.is_(None)))
        keys = [LC.c.provider, LC.c.model, LC.c.purpose]
        q = (
            select(*keys, func.count(LC.c.id).label("calls"), func.sum(LC.c.tokens_in).label("tokens_in"),
                   func.sum(LC.c.tokens_out).label("tokens_out"), func.sum(LC.c.cost_usd).label("cost_usd"),
                   func.avg(LC.c.latency_ms).label("mean_latency_ms"),
                   func.sum(case((LC.c.error.is_not(None), 1), else_=0)).label("errors"))
            .select_from(frm).where(*conds).group_by(*keys).order_by(*keys)
        )
        with engine.connect() as c:
            return pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "provider", "model", "purpose", "calls", "tokens_in", "tokens_out", "cost_usd",
                "mean_latency_ms", "errors"])

    return cached(engine, "llm_summary", sel, compute).copy()


# --- Annotators: intelligibility and agreement ------------------------------------------------


@dataclass
class Agreement:
    """Cohen's κ between two annotators on the instances both saw."""

    annotator_a: str
    annotator_b: str
    instances: int
    observed: float
    kappa: float | None
    pairs: list[tuple[str, str]] = field(default_factory=list)


def annotator_tags(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Each annotated session's first and last human tag, for the earliest session per
    instance and annotator (in SQL: one row per session, never the messages)."""

    def compute() -> pd.DataFrame:
        human = (
            select(M.c.session_id, func.min(M.c.j).label("fj"), func.max(M.c.j).label("lj"))
            .where(M.c.sender == "human").group_by(M.c.session_id).subquery()
        )
        mf, ml = M.alias("mf"), M.alias("ml")
        frm = (
            _sessions_from(sel).join(A, A.c.id == S.c.annotator_id)
            .join(human, human.c.session_id == S.c.id)
            .join(mf, and_(mf.c.session_id == S.c.id, mf.c.j == human.c.fj))
            .join(ml, and_(ml.c.session_id == S.c.id, ml.c.j == human.c.lj))
        )
        q = (
            select(S.c.instance_id, A.c.name.label("annotator"), S.c.id.label("session_id"),
                   mf.c.tag.label("first"), ml.c.tag.label("last"))
            .select_from(frm).where(*_where(sel)).order_by(S.c.id)
        )
        cols = ["instance_id", "annotator", "session_id", "first", "last"]
        with engine.connect() as c:
            df = pd.DataFrame([tuple(r) for r in c.execute(q)], columns=cols)
        return df.drop_duplicates(["instance_id", "annotator"], keep="first").reset_index(drop=True)

    return cached(engine, "annotator_tags", sel, compute).copy()


def agreement(engine: Engine, sel: Selection, which: str = "first") -> list[Agreement]:
    """Cohen's κ on the human tags ("first": the reply to INIT; "last": the final verdict)
    for every pair of annotators, over the instances both annotated."""
    if which not in ("first", "last"):
        raise ValueError("which must be 'first' or 'last'")
    per = annotator_tags(engine, sel)
    out: list[Agreement] = []
    names = sorted(per["annotator"].unique()) if not per.empty else []
    by = {a: dict(zip(d.instance_id, d[which], strict=True)) for a, d in per.groupby("annotator")} if names else {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(by[a]) & set(by[b]))
            if not shared:
                continue
            pairs = [(str(by[a][x]), str(by[b][x])) for x in shared]
            observed = sum(x == y for x, y in pairs) / len(pairs)
            out.append(Agreement(a, b, len(pairs), observed, cohen_kappa(pairs), pairs))
    return out


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


def find_experiments(engine: Engine, names: Sequence[str]) -> list[dict[str, Any]]:
    """Experiments by name or numeric id, in the order asked; raises LookupError naming the missing."""
    exps = options(engine).experiments
    out = []
    for name in names:
        hit = next((e for e in exps if e["name"] == name), None)
        if hit is None and name.isdigit():
            hit = next((e for e in exps if e["id"] == int(name)), None)
        if hit is None:
            raise LookupError(f"no experiment named {name!r}")
        out.append(hit)
    return out
