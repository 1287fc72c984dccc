"""Intelligibility of sessions: Definitions 1 and 2 of the papers (DESIGN §2).

For agent a, T_a is the list of tags a sent in the session, INIT excluded.

- one-way(a): T_a contains RATIFY or REVISE, and no REJECT.
- two-way: one-way(h) and one-way(m).
- strong(a): T_a is non-empty and every tag is RATIFY or REVISE.
- ultra-strong(a): strong(a) and T_a contains a REVISE.

Aborted sessions are never intelligible and are counted apart. Pure: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pxp.protocols.pxp.rules import Sender, Tag

METRICS: tuple[str, ...] = (
    "one_way_human",
    "one_way_machine",
    "two_way",
    "strong_human",
    "strong_machine",
    "ultra_strong_human",
    "ultra_strong_machine",
)

#: The papers' Table 1 row labels, in order.
METRIC_LABELS: dict[str, str] = {
    "one_way_human": "1-way intelligible sessions for Human",
    "one_way_machine": "1-way intelligible sessions for Machine",
    "two_way": "2-way intelligible sessions",
    "strong_human": "Strong intelligible sessions for Human",
    "strong_machine": "Strong intelligible sessions for Machine",
    "ultra_strong_human": "Ultra-Strong intelligible sessions for Human",
    "ultra_strong_machine": "Ultra-Strong intelligible sessions for Machine",
}

_POSITIVE = frozenset({Tag.RATIFY, Tag.REVISE})

TagSeq = Sequence[tuple[Sender, Tag]]


def one_way(tags: Iterable[Tag]) -> bool:
    """Definition 1: T_a contains RATIFY or REVISE and no REJECT (INIT excluded)."""
    ts = [t for t in tags if t is not Tag.INIT]
    return any(t in _POSITIVE for t in ts) and Tag.REJECT not in ts


def strong(tags: Iterable[Tag]) -> bool:
    """Definition 2: T_a is non-empty and every tag is RATIFY or REVISE."""
    ts = [t for t in tags if t is not Tag.INIT]
    return bool(ts) and all(t in _POSITIVE for t in ts)


def ultra_strong(tags: Iterable[Tag]) -> bool:
    """Definition 2: strong, and at least one REVISE."""
    ts = [t for t in tags if t is not Tag.INIT]
    return strong(ts) and Tag.REVISE in ts


def session_flags(messages: TagSeq, *, aborted: bool = False) -> dict[str, bool]:
    """The seven Table 1 properties of one session from its (sender, tag) list."""
    if aborted:
        return dict.fromkeys(METRICS, False)
    th = [t for s, t in messages if s is Sender.HUMAN]
    tm = [t for s, t in messages if s is Sender.MACHINE]
    h, m = one_way(th), one_way(tm)
    return {
        "one_way_human": h,
        "one_way_machine": m,
        "two_way": h and m,
        "strong_human": strong(th),
        "strong_machine": strong(tm),
        "ultra_strong_human": ultra_strong(th),
        "ultra_strong_machine": ultra_strong(tm),
    }


def flags_by_bound(messages: TagSeq, n: int, *, aborted: bool = False) -> dict[str, list[bool]]:
    """The properties of the session truncated to its first j messages, j = 1..n."""
    out: dict[str, list[bool]] = {name: [] for name in METRICS}
    for j in range(1, n + 1):
        flags = session_flags(messages[:j], aborted=aborted)
        for name in METRICS:
            out[name].append(flags[name])
    return out


@dataclass(frozen=True, slots=True)
class SessionTags:
    """What the metrics need of a stored session."""

    tags: tuple[tuple[Sender, Tag], ...]
    aborted: bool = False


@dataclass
class RepetitionCounts:
    """Counts for one repetition (one Run): totals, per metric, and per message bound."""

    total_sessions: int
    aborted_sessions: int
    metrics: dict[str, int]
    by_message: dict[str, list[int]]


def count_repetition(sessions: Iterable[SessionTags], n: int) -> RepetitionCounts:
    """Sum the per-session flags of one repetition (all its finished or aborted sessions)."""
    total = aborted = 0
    metrics = dict.fromkeys(METRICS, 0)
    by_message = {name: [0] * n for name in METRICS}
    for s in sessions:
        total += 1
        aborted += s.aborted
        if s.aborted:
            continue
        for name, flag in session_flags(s.tags).items():
            metrics[name] += flag
        for name, flags in flags_by_bound(s.tags, n).items():
            row = by_message[name]
            for j, flag in enumerate(flags):
                row[j] += flag
    return RepetitionCounts(total, aborted, metrics, by_message)


@dataclass
class MetricSummary:
    """Median count over repetitions, its proportion of total sessions, and the range."""

    count: float
    proportion: float
    min: int
    max: int


@dataclass
class Table1:
    """The papers' Table 1 aggregated over R repetitions, plus the Figure 1 curves."""

    repetitions: int
    total_sessions: float
    aborted_sessions: float
    metrics: dict[str, MetricSummary]
    by_message: dict[str, list[float]]
    by_message_min: dict[str, list[int]] = field(default_factory=dict)
    by_message_max: dict[str, list[int]] = field(default_factory=dict)

    def as_json(self, experiment: str) -> dict[str, object]:
        """The `pxp report --format json` shape (issue: the spine, item 7)."""
        return {
            "experiment": experiment,
            "repetitions": self.repetitions,
            "total_sessions": _num(self.total_sessions),
            "aborted_sessions": _num(self.aborted_sessions),
            "metrics": {
                name: {
                    "count": _num(s.count),
                    "proportion": round(s.proportion, 4),
                    "min": s.min,
                    "max": s.max,
                }
                for name, s in self.metrics.items()
            },
            "by_message": {name: [_num(c) for c in v] for name, v in self.by_message.items()},
            "by_message_min": self.by_message_min,
            "by_message_max": self.by_message_max,
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _median(xs: Sequence[int]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def aggregate(reps: Sequence[RepetitionCounts], n: int) -> Table1:
    """Aggregate repetitions as the papers do: median count, proportion, min and max.

    The proportion is the median count over the median number of total sessions.
    """
    total = _median([r.total_sessions for r in reps])
    aborted = _median([r.aborted_sessions for r in reps])
    metrics: dict[str, MetricSummary] = {}
    by_message: dict[str, list[float]] = {}
    by_min: dict[str, list[int]] = {}
    by_max: dict[str, list[int]] = {}
    for name in METRICS:
        counts = [r.metrics[name] for r in reps]
        med = _median(counts)
        metrics[name] = MetricSummary(
            count=med,
            proportion=(med / total) if total else 0.0,
            min=min(counts, default=0),
            max=max(counts, default=0),
        )
        cols = [[r.by_message[name][j] for r in reps] for j in range(n)]
        by_message[name] = [_median(c) for c in cols]
        by_min[name] = [min(c, default=0) for c in cols]
        by_max[name] = [max(c, default=0) for c in cols]
    return Table1(len(reps), total, aborted, metrics, by_message, by_min, by_max)


def table1(runs: Mapping[object, Iterable[SessionTags]], n: int) -> Table1:
    """Table 1 and the by-bound curves for the sessions of each repetition."""
    return aggregate([count_repetition(sessions, n) for sessions in runs.values()], n)


# --- Signatures: the same definitions as intervals over the message bound j ---------------
#
# Each property of a session truncated to its first j messages is true exactly on an
# interval lo <= j < hi, where lo and hi are "first message number at which agent a sent
# a tag of some kind". pxp.analysis.queries computes these firsts in SQL (one GROUP BY), so the
# table and the curves need no message in Python; the functions below are the pure
# reference for that path and are tested against session_flags / flags_by_bound.


@dataclass(frozen=True, slots=True)
class AgentFirsts:
    """First message position (1-based, None = never) at which an agent sent each kind of tag.

    positive: RATIFY or REVISE; reject: REJECT; negative: any non-INIT tag that is not
    RATIFY or REVISE (REFUTE, REJECT); any: any non-INIT tag; revise: REVISE.
    """

    positive: int | None = None
    reject: int | None = None
    negative: int | None = None
    any: int | None = None
    revise: int | None = None


@dataclass(frozen=True, slots=True)
class Signature:
    """What Definitions 1–2 need of a session at every message bound: each agent's firsts."""

    human: AgentFirsts
    machine: AgentFirsts


def _firsts(positions: Sequence[tuple[int, Tag]]) -> AgentFirsts:
    positive = reject = negative = any_ = revise = None
    for j, t in positions:
        if t is Tag.INIT:
            continue
        if any_ is None:
            any_ = j
        if t in _POSITIVE:
            if positive is None:
                positive = j
            if t is Tag.REVISE and revise is None:
                revise = j
        elif negative is None:
            negative = j
        if t is Tag.REJECT and reject is None:
            reject = j
    return AgentFirsts(positive=positive, reject=reject, negative=negative, any=any_, revise=revise)


def signature(messages: TagSeq) -> Signature:
    """The session's signature; positions are 1-based places in the ordered list (= j)."""
    pos = list(enumerate((t for _, t in messages), start=1))
    senders = [s for s, _ in messages]
    return Signature(
        human=_firsts([(j, t) for (j, t), s in zip(pos, senders, strict=True) if s is Sender.HUMAN]),
        machine=_firsts([(j, t) for (j, t), s in zip(pos, senders, strict=True) if s is Sender.MACHINE]),
    )


Interval = tuple[int | None, int | None]


def _max(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def metric_intervals(sig: Signature) -> dict[str, Interval]:
    """For each Table 1 property, [lo, hi): true at bound j iff lo <= j < hi (None: never / ∞).

    one-way(a): first positive <= j < first REJECT; strong(a): first tag <= j < first
    negative; ultra-strong(a): first REVISE <= j < first negative; two-way: both one-ways.
    """
    h, m = sig.human, sig.machine
    return {
        "one_way_human": (h.positive, h.reject),
        "one_way_machine": (m.positive, m.reject),
        "two_way": (_max(h.positive, m.positive), _min(h.reject, m.reject)),
        "strong_human": (h.any, h.negative),
        "strong_machine": (m.any, m.negative),
        "ultra_strong_human": (h.revise, h.negative),
        "ultra_strong_machine": (m.revise, m.negative),
    }


def in_interval(iv: Interval, j: int | None = None) -> bool:
    """Whether the property holds at bound j (None: the whole session)."""
    lo, hi = iv
    if lo is None:
        return False
    if j is None:
        return hi is None
    return lo <= j and (hi is None or j < hi)


def signature_flags(sig: Signature, j: int | None = None) -> dict[str, bool]:
    """session_flags computed from a signature (whole session, or truncated to j messages)."""
    return {name: in_interval(iv, j) for name, iv in metric_intervals(sig).items()}


# --- Agreement between annotators -----------------------------------------------------------


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's κ for two raters' labels on the same items; None when undefined.

    κ = (p_o − p_e) / (1 − p_e), with p_e from each rater's marginal frequencies.
    Undefined for no items, and when p_e = 1 (both raters always gave the same one label).
    """
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(a == b for a, b in pairs) / n
    cats = {a for a, _ in pairs} | {b for _, b in pairs}
    p_e = sum(
        (sum(a == c for a, _ in pairs) / n) * (sum(b == c for _, b in pairs) / n) for c in cats
    )
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def table1_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Table 1's rows in the papers' order from `Table1.as_json`: (label, `count (proportion)`, `min–max`)."""
    out = [("Total sessions", str(report["total_sessions"]), "")]
    for name in METRICS:
        m = report["metrics"][name]
        out.append((METRIC_LABELS[name], f"{m['count']} ({m['proportion']:.2f})", f"{m['min']}–{m['max']}"))
    return out
