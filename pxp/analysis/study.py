"""A named study (docs/research.md, Grids and comparisons): its experiments' Table 1 side by side, and the paired
comparisons.

The experiments of study S are those `pxp run --grid` created with config["study"] = S
(pxp.running.pxp.controlled.grid). Two of them are compared pair by pair (pxp.analysis.statistics: paired
differences, bootstrap 95 % CIs, McNemar's test) when they differ only in the machine: same
dataset, interaction split, seed, shuffle, n and k, hence the same instances in the same order.
"""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.analysis.report import ReportError, render_many, report_json
from pxp.analysis.statistics import ComparisonError, compare_experiments, comparison_lines
from pxp.storage.store import db_session
from pxp.storage.tables import Experiment

#: what two experiments of a study share to be compared pair by pair (all but the machine)
SAME = ("dataset", "split", "seed", "shuffle", "n", "k")


def study_names(engine: Engine) -> list[str]:
    """The names of the studies in the database, sorted."""
    with db_session(engine) as db:
        configs = db.exec(select(Experiment.config).where(col(Experiment.name).contains("/"))).all()
    return sorted({str(c["study"]) for c in configs if isinstance(c, dict) and c.get("study")})


def study_experiments(engine: Engine, study: str) -> list[Experiment]:
    """The study's experiments in creation order; ReportError when there is none."""
    with db_session(engine) as db:
        rows = db.exec(select(Experiment).where(col(Experiment.name).startswith(f"{study}/"))
                       .order_by(col(Experiment.id))).all()
    exps = [e for e in rows if (e.config or {}).get("study") == study]
    if not exps:
        raise ReportError(f"no study named {study!r} (`pxp run --grid FILE` creates one)")
    return exps


def _machine(exp: Experiment) -> str:
    return str((exp.config.get("grid") or {}).get("machine") or exp.config.get("machine"))


def machine_pairs(exps: list[Experiment]) -> list[tuple[Experiment, Experiment]]:
    """Every pair of experiments that differ only in the machine (SAME equal), in creation order."""
    groups: dict[tuple[Any, ...], list[Experiment]] = {}
    for e in exps:
        groups.setdefault(tuple(repr(e.config.get(k)) for k in SAME), []).append(e)
    return [(a, b) for g in groups.values() for a, b in itertools.combinations(g, 2) if _machine(a) != _machine(b)]


def study_json(engine: Engine, study: str, *, seed: int = 0) -> dict[str, Any]:
    """Table 1 of each experiment and the paired comparison of each machine pair (JSON-ready)."""
    exps = study_experiments(engine, study)
    comparisons = []
    for a, b in machine_pairs(exps):
        same = {k: a.config.get(k) for k in SAME}
        try:
            cmp = compare_experiments(engine, a.name, b.name, seed=seed)
        except ComparisonError as e:
            cmp = {"a": a.name, "b": b.name, "error": str(e)}
        comparisons.append({"machines": [_machine(a), _machine(b)], "same": same, **cmp})
    return {
        "study": study,
        "experiments": [report_json(engine, e.name) | {"status": e.status} for e in exps],
        "comparisons": comparisons,
    }


def study_lines(rep: dict[str, Any]) -> list[str]:
    """The study as text: Table 1 side by side, then one paired comparison per machine pair."""
    lines = [f"Study {rep['study']}: {len(rep['experiments'])} experiment(s)"]
    unfinished = [r["experiment"] for r in rep["experiments"] if r.get("status") != "finished"]
    if unfinished:
        lines.append(f"not finished: {', '.join(unfinished)}")
    lines += ["", render_many(rep["experiments"], "table")]
    if not rep["comparisons"]:
        lines += ["", "No two experiments differ only in the machine: nothing to compare pair by pair."]
    for cmp in rep["comparisons"]:
        same = ", ".join(f"{k} {v}" for k, v in cmp["same"].items() if v is not None)
        lines += ["", f"Paired comparison, {cmp['machines'][0]} vs {cmp['machines'][1]} ({same})"]
        lines += [cmp["error"]] if "error" in cmp else comparison_lines(cmp)
    return lines
