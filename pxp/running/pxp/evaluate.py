"""Machine performance on a split (the follow-up paper's Method: validation and test sets).

The machine answers every instance of the split as a fresh message 1 carrying the
context it currently keeps (ASK_AGENT with C = the carried sessions, no history); the
human proxy's MATCH and AGREE compare that answer with the reference answer. Scores are
prediction accuracy (MATCH), explanation accuracy (AGREE) and both. LEARN uses the
validation split; the performance series (Figure 2 of the papers) uses the test split.
"""

from __future__ import annotations

import contextvars
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.agents.base import Agent, AgentUnavailable, CallRecord, CarriedSession, FormatFailure, InstanceView, Query
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import Sender
from pxp.storage.store import db_session, experiment_runs
from pxp.storage.tables import Evaluation, Run

METRIC_NAMES = ("prediction", "explanation", "both")
EVAL_PURPOSE = "eval"


class EvaluationError(PxpError, ValueError):
    """An accuracy pxp does not measure; one line."""


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
    def of(cls, row: Evaluation) -> Score:
        return cls(row.prediction_accuracy, row.explanation_accuracy, row.both_accuracy, row.instances)


def _judge(
    machine: Agent, human: Agent, x: InstanceView, carry: Sequence[CarriedSession], n: int, k: int
) -> tuple[bool, bool, list[CallRecord]]:
    q = Query(instance=x, sender=Sender.MACHINE, j=1, n=n, k=k, history=(), carry=carry)
    hq = Query(instance=x, sender=Sender.HUMAN, j=2, n=n, k=k, history=())
    try:
        try:
            answer = machine.ask(q)
        except FormatFailure:
            return False, False, q.calls  # an unparseable answer is simply wrong here
        ref = x.reference
        try:
            pred = bool(human.match(answer.prediction, ref.prediction, hq))
        except ValueError:  # e.g. an invalid SMILES: a parse failure, counted as wrong
            pred = False
        try:
            expl = bool(human.agree(answer.explanation, ref.explanation, hq))
        except FormatFailure:  # the checker gave no usable verdict: not counted as agreeing
            expl = False
        return pred, expl, [*q.calls, *hq.calls]
    except AgentUnavailable as err:
        err.calls = [*q.calls, *hq.calls]  # type: ignore[attr-defined]  # the calls ride on the agents' exception
        raise


def evaluate(
    machine: Agent,
    human: Agent,
    instances: Sequence[InstanceView],
    carry: Sequence[CarriedSession],
    *,
    n: int = 10,
    k: int = 3,
    workers: int = 1,
    record: Callable[[list[CallRecord]], None] | None = None,
    executor: Executor | None = None,
) -> Score:
    """Accuracy of the machine with context `carry` on `instances` (in parallel up to `workers`,
    on `executor` when given, else on a pool of its own).

    Every call is handed to `record` (purpose "eval"), also when an AgentUnavailable
    interrupts the evaluation; that error is then raised.
    """
    if not instances:
        return Score(0.0, 0.0, 0.0, 0)
    carry = tuple(carry)
    results: list[tuple[bool, bool] | None] = [None] * len(instances)
    calls: list[CallRecord] = []
    failure: AgentUnavailable | None = None

    def one(i: int) -> None:
        nonlocal failure
        try:
            pred, expl, cs = _judge(machine, human, instances[i], carry, n, k)
        except AgentUnavailable as err:
            failure = failure or err
            calls.extend(getattr(err, "calls", []))
            return
        results[i] = (pred, expl)
        calls.extend(cs)

    if workers <= 1 or len(instances) == 1:
        for i in range(len(instances)):
            one(i)
            if failure is not None:
                break
    else:
        # each task runs in a copy of the caller's context, so the call journal (pxp.running.pxp.journal) reaches it
        parent = contextvars.copy_context()

        def in_context(i: int) -> None:
            parent.copy().run(one, i)

        if executor is not None:
            list(executor.map(in_context, range(len(instances))))
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(instances)), thread_name_prefix="pxp-eval") as pool:
                list(pool.map(in_context, range(len(instances))))
    for c in calls:
        c.purpose = EVAL_PURPOSE
    if record is not None:
        record(calls)
    if failure is not None:
        raise failure
    done = [r for r in results if r is not None]
    total = len(done)
    return Score(
        prediction=sum(p for p, _ in done) / total,
        explanation=sum(e for _, e in done) / total,
        both=sum(p and e for p, e in done) / total,
        instances=total,
    )


# --- the performance series (Figure 2) -------------------------------------------------


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
    with db_session(engine) as db:
        runs = experiment_runs(db, experiment_id=experiment_id)
        rep_of = {r.id: r.repetition for r in runs}
        rows = list(
            db.exec(
                select(Evaluation)
                .join(Run, col(Run.id) == col(Evaluation.run_id))
                .where(Run.experiment_id == experiment_id)
                .order_by(col(Evaluation.run_id), col(Evaluation.after_session))
            ).all()
        )
    out: dict[str, Any] = {}
    for split in sorted({r.split for r in rows}, key=lambda s: (s != "test", s)):
        per_run: dict[int, list[Evaluation]] = {}
        for r in rows:
            if r.split == split:
                per_run.setdefault(rep_of[r.run_id], []).append(r)
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
