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

from pxp.protocol import Sender, Tag

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
