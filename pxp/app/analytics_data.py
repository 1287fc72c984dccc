"""What each Analytics view reads for a selection (docs/research.md, Analytics; docs/development.md, Reading a
study). The view calls its function to draw; the background warming (pxp.analysis.warm) calls the same functions
with what a first visitor is shown (`first_request`, the widgets' defaults), so both read the same cache entries
(pxp.analysis.queries.cached) by construction. Not a page, and no streamlit: the warming thread imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from functools import partial
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from pxp.analysis.agreement import Agreement, agreement, agreement_report, disagreements
from pxp.analysis.costs import llm_costs, llm_summary
from pxp.analysis.performance import evaluations
from pxp.analysis.queries import Options, Selection, options
from pxp.analysis.report import aborted_by_reason
from pxp.analysis.tables import session_frame, session_lengths, table1, table1_by, tag_transitions
from pxp.analysis.warm import Step
from pxp.app.selection import initial_experiments
from pxp.protocols.pxp.intelligibility import Table1

#: the Columns picker: the first is what the page opens with
COLUMNS = {
    "experiment": "one column per experiment",
    "annotator": "one column per annotator (h1 vs h2)",
    "label": "one column per label",
    "dataset": "one column per dataset",
    "pooled": "everything selected in one column",
}
#: Figure 2's "Evaluated on", and the Annotators' agreement on each one's first or last tag: the first is the default
SPLITS = ("test", "val", "train")
WHICH = ("first", "last")


@dataclass(frozen=True)
class Request:
    """What the page's filters ask for: the selection, the column grouping and the chosen experiments' names."""

    opts: Options
    sel: Selection
    by: str | None
    names: list[str]


def request(
    opts: Options, chosen: Sequence[int], columns: str = next(iter(COLUMNS)), *, datasets: Sequence[int] = (),
    repetitions: Sequence[int] = (), annotators: Sequence[int] = (), labels: Sequence[str] = (),
    since: date | None = None, until: date | None = None,
) -> Request:
    """The request of the filters' values (unset ones: no filter)."""
    names = {e["id"]: e["name"] for e in opts.experiments}
    sel = Selection(
        experiments=tuple(sorted(chosen)), datasets=tuple(sorted(datasets)), repetitions=tuple(sorted(repetitions)),
        annotators=tuple(sorted(annotators)), labels=tuple(sorted(labels)), since=since, until=until,
    )
    return Request(opts, sel, None if columns == "pooled" else columns, [str(names[i]) for i in chosen if i in names])


def first_request(opts: Options) -> Request:
    """What a first visitor is shown: the default experiment (pxp.app.selection), the filters untouched."""
    return request(opts, initial_experiments(opts.experiments, None, None))


# --- Each view's data ------------------------------------------------------------------------------------------------


def tables(engine: Engine, req: Request) -> dict[str, Table1]:
    """Table 1 per column (Table 1, Figure 1); experiment columns in the order they were chosen."""
    sel, by = req.sel, req.by
    if by is None:
        t = table1(engine, sel)
        return {"selected": t} if t.repetitions else {}
    found = {(g or "(none)"): t for g, t in table1_by(engine, sel, by).items()}
    if by == "experiment" and req.names:
        order = {n: i for i, n in enumerate(req.names)}
        found = dict(sorted(found.items(), key=lambda kv: order.get(kv[0], len(order))))
    return found


def table1_view(engine: Engine, req: Request) -> tuple[dict[str, Table1], dict[str, int]]:
    """Table 1 per column and the aborted sessions by reason."""
    return tables(engine, req), aborted_by_reason(engine, req.sel.experiments)


def breakdown(engine: Engine, req: Request, by: str) -> dict[str, Table1]:
    """Table 1 per label or annotator (Labels, Annotators)."""
    return {(g or "(none)"): t for g, t in table1_by(engine, req.sel, by).items()}


@dataclass(frozen=True)
class AnnotatorsData:
    """The Annotators view: Table 1 per annotator, κ per pair, the agreement report and the disagreements."""

    tables: dict[str, Table1]
    agreement: list[Agreement]
    report: dict[str, Any]
    disagreements: pd.DataFrame


def annotators_view(engine: Engine, req: Request, which: str = WHICH[0]) -> AnnotatorsData:
    return AnnotatorsData(breakdown(engine, req, "annotator"), agreement(engine, req.sel, which=which),
                          agreement_report(engine, req.sel), disagreements(engine, req.sel))


def figure2_view(engine: Engine, req: Request, split: str = SPLITS[0]) -> pd.DataFrame:
    return evaluations(engine, req.sel, split=split)


def transitions_view(engine: Engine, req: Request) -> pd.DataFrame:
    return tag_transitions(engine, req.sel)


def lengths_view(engine: Engine, req: Request) -> pd.DataFrame:
    return session_lengths(engine, req.sel)


def flags_view(engine: Engine, req: Request) -> pd.DataFrame:
    return session_frame(engine, req.sel)


def costs_view(engine: Engine, req: Request) -> tuple[pd.DataFrame, pd.DataFrame]:
    return llm_costs(engine, req.sel), llm_summary(engine, req.sel)


def compare_pair(req: Request) -> tuple[str, str] | None:
    """Compare's two experiments when it opens: the first two chosen, then the others in order (None: fewer than two
    experiments)."""
    names = [str(e["name"]) for e in req.opts.experiments]
    first = [n for n in req.names if n in names] + [n for n in names if n not in req.names]
    return (first[0], first[1]) if len(first) >= 2 else None


def compare_view(engine: Engine, a: str, b: str) -> dict[str, Any]:
    """The paired comparison of `a` and `b` (ComparisonError when they cannot be paired)."""
    from pxp.analysis.statistics import compare_experiments  # scipy loads only when Compare is shown

    return compare_experiments(engine, a, b)


def _compare_first(engine: Engine, req: Request) -> object:
    from pxp.analysis.statistics import ComparisonError

    pair = compare_pair(req)
    try:
        return None if pair is None else compare_view(engine, *pair)
    except ComparisonError:  # the page's answer (two experiments on other instances), not a failure
        return None


#: what each view reads with its widgets' defaults, in the page's order (Common ground reads its probes uncached)
FIRST: dict[str, Callable[[Engine, Request], object]] = {
    "Table 1": table1_view,
    "Figure 1": tables,
    "Figure 2": figure2_view,
    "Transitions": transitions_view,
    "Session lengths": lengths_view,
    "Labels": partial(breakdown, by="label"),
    "Annotators": annotators_view,
    "LLM cost": costs_view,
    "Per-session flags": flags_view,
    "Compare": _compare_first,
}


def warm_steps(engine: Engine) -> list[Step]:
    """The background warming's steps: each view as a first visitor opens it (none before the first experiment)."""
    opts = options(engine)
    if not opts.experiments:
        return []
    req = first_request(opts)
    return [(f"the Analytics view {view}", partial(data, engine, req)) for view, data in FIRST.items()]
