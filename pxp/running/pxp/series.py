"""The machine performance series (Figure 2 of the papers): the stored evaluations of an experiment's runs, their
median, min and max over repetitions after each session, and its text. SQLAlchemy Core over
pxp.storage.core_tables, so `pxp report` loads no ORM (docs/development.md, "Start-up"); pxp.running.pxp.evaluate
measures the scores.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Engine, select

from pxp.protocols.errors import PxpError
from pxp.storage import core_tables as ct

METRIC_NAMES = ("prediction", "explanation", "both")


class EvaluationError(PxpError, ValueError):
    """An accuracy pxp does not measure; one line."""


class EvaluationRow(Protocol):
    """A stored evaluation (pxp.storage.tables.Evaluation, or its Core row)."""

    @property
    def prediction_accuracy(self) -> float: ...
    @property
    def explanation_accuracy(self) -> float: ...
    @property
    def both_accuracy(self) -> float: ...
    @property
    def instances(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Score:
    """Accuracies of the machine on one split (fractions of `instances`)."""

    prediction: float
    explanation: float
    both: float
    instances: int

    def metric(self, name: str) -> float:
        """One of prediction, explanation, both."""
        if name not in METRIC_NAMES:
            raise EvaluationError(f"unknown accuracy {name!r} (one of {', '.join(METRIC_NAMES)})")
        return float(getattr(self, name))

    @classmethod
    def of(cls, row: EvaluationRow) -> Score:
        return cls(row.prediction_accuracy, row.explanation_accuracy, row.both_accuracy, row.instances)


def _median(xs: list[float]) -> float:
    return round(float(statistics.median(xs)), 4)


Summary = dict[str, dict[str, list[float | None]]]


def carry_forward(per_run: dict[Any, list[tuple[int, Score]]]) -> tuple[list[int], Summary]:
    """Median, min and max over runs at every point where some run was evaluated.

    A run is only evaluated after sessions whose context was kept, so its performance
    after session i is its latest evaluation at or before i (Figure 2 of the follow-up paper).
    """
    points = sorted({p for rs in per_run.values() for p, _ in rs})
    agg: Summary = {a: {m: [] for m in METRIC_NAMES} for a in ("median", "min", "max")}
    for p in points:
        latest = [max((r for r in rs if r[0] <= p), key=lambda r: r[0], default=None) for rs in per_run.values()]
        scores = [r[1] for r in latest if r is not None]
        for m in METRIC_NAMES:
            vals = [sc.metric(m) for sc in scores]
            agg["median"][m].append(_median(vals) if vals else None)
            agg["min"][m].append(round(min(vals), 4) if vals else None)
            agg["max"][m].append(round(max(vals), 4) if vals else None)
    return points, agg


def performance_series(engine: Engine, experiment_id: int) -> dict[str, Any]:
    """Machine performance after each session, per split, aggregated over repetitions.

    A run is only evaluated after sessions whose context was kept, so its performance
    after session i is its latest evaluation at or before i. For every point where
    some run was evaluated: the median over runs, and min and max (error bars).
    Shape: {split: {"after_session": [...], "median"|"min"|"max": {metric: [...]},
    "runs": {repetition: [{"after_session", "prediction", "explanation", "both"}]}}}.
    """
    ev, run = ct.evaluation, ct.run
    q = (select(run.c.repetition, ev.c.split, ev.c.after_session, ev.c.prediction_accuracy,
                ev.c.explanation_accuracy, ev.c.both_accuracy, ev.c.instances)
         .select_from(ev.join(run, run.c.id == ev.c.run_id)).where(run.c.experiment_id == experiment_id)
         .order_by(ev.c.run_id, ev.c.after_session))
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    out: dict[str, Any] = {}
    for split in sorted({r.split for r in rows}, key=lambda s: (s != "test", s)):
        per_run: dict[int, list[Any]] = {}
        for r in rows:
            if r.split == split:
                per_run.setdefault(r.repetition, []).append(r)
        points, agg = carry_forward(
            {rep: [(r.after_session, Score.of(r)) for r in rs] for rep, rs in per_run.items()}
        )
        out[split] = {
            "after_session": points,
            **agg,
            "runs": {
                str(rep): [
                    {
                        "after_session": r.after_session,
                        "prediction": round(r.prediction_accuracy, 4),
                        "explanation": round(r.explanation_accuracy, 4),
                        "both": round(r.both_accuracy, 4),
                        "instances": r.instances,
                    }
                    for r in rs
                ]
                for rep, rs in sorted(per_run.items())
            },
        }
    return out


def _fmt(med: float | None, lo: float | None, hi: float | None) -> str:
    if med is None or lo is None or hi is None:
        return "-"
    return f"{med:.2f} [{lo:.2f}–{hi:.2f}]"


def series_rows(series: dict[str, Any], split: str) -> list[tuple[str, str, str, str]]:
    """(after session, prediction, explanation, both) cells: median [min–max]."""
    s = series[split]
    rows = []
    for i, p in enumerate(s["after_session"]):
        pred, expl, both = (_fmt(s["median"][m][i], s["min"][m][i], s["max"][m][i]) for m in METRIC_NAMES)
        rows.append((str(p), pred, expl, both))
    return rows


def summary_points(series: dict[str, Any], split: str) -> list[int]:
    """Indices of the points a short series shows: first, last, best (median of both), every tenth."""
    s = series[split]
    count = len(s["after_session"])
    if count == 0:
        return []
    both = s["median"][METRIC_NAMES[-1]]
    best = max(range(count), key=lambda i: (both[i] is not None, both[i] or 0.0, -i))
    return sorted({0, count - 1, best, *range(9, count, 10)})


def render_series(series: dict[str, Any], fmt: str, *, full: bool = False) -> list[str]:
    """Text lines (table or markdown rows) of the performance series (the CSV is pxp.analysis.report.table1_csv).

    The test split when there is one (Figure 2); the validation trace stays in the JSON.
    Table and markdown show first, last, best and every tenth point unless `full`.
    """
    lines: list[str] = []
    for split in [s for s in series if s == "test"] or list(series):
        body = series_rows(series, split)
        title = f"Machine performance on the {split} split after each session (median [min–max] over repetitions)"
        note: list[str] = []
        if not full:
            keep = summary_points(series, split)
            if len(keep) < len(body):
                note = [f"{len(keep)} of {len(body)} points: first, last, best, every tenth "
                        "(--full or --format csv|json for all)"]
                body = [body[i] for i in keep]
        head = ("After session", "Prediction", "Explanation", "Both")
        if fmt == "markdown":
            lines += ["", f"_{title}_", *(f"_{n}_" for n in note), ""]
            lines += ["| " + " | ".join(head) + " |", "| --: | :-: | :-: | :-: |"]
            lines += ["| " + " | ".join(r) + " |" for r in body]
        else:
            widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
            lines += ["", title, *note]
            lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
            lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return lines
