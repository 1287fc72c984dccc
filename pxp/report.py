"""Table 1 of the papers for an experiment, and its renderings (table, json, markdown, csv).

One code path for `pxp report` and the analytics page.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from sqlalchemy import Engine

from pxp.intelligibility import METRIC_LABELS, METRICS, SessionTags, Table1, table1
from pxp.models import Experiment
from pxp.store import db_session, experiment_session_tags, find_experiment

FORMATS = ("table", "json", "markdown", "csv")


class ReportError(LookupError):
    """The experiment asked for does not exist."""


def experiment_table(engine: Engine, exp: Experiment) -> Table1:
    """Table 1 over the experiment's repetitions; open sessions are left out."""
    with db_session(engine) as db:
        runs, sessions, tags = experiment_session_tags(db, experiment_id=exp.id or 0)
    per_run: dict[object, list[SessionTags]] = {}
    for run in runs:
        rows = []
        for s in sessions.get(run.id or 0, []):
            if s.status == "open":
                continue
            rows.append(SessionTags(tuple(tags.get(s.id or 0, ())), aborted=s.status == "aborted"))
        per_run[run.id] = rows
    return table1(per_run, exp.n)


def report_json(engine: Engine, name_or_id: str) -> dict[str, Any]:
    """The JSON report of one experiment (shape documented in the README)."""
    with db_session(engine) as db:
        exp = find_experiment(db, name_or_id=name_or_id)
    if exp is None:
        raise ReportError(f"no experiment named {name_or_id!r}")
    return experiment_table(engine, exp).as_json(exp.name)


def _cell(m: dict[str, Any]) -> str:
    return f"{m['count']} ({m['proportion']:.2f})"


def rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, `count (proportion)`, `min–max`) rows in the papers' order."""
    out = [("Total sessions", str(report["total_sessions"]), "")]
    for name in METRICS:
        m = report["metrics"][name]
        out.append((METRIC_LABELS[name], _cell(m), f"{m['min']}–{m['max']}"))
    return out


def render(report: dict[str, Any], fmt: str) -> str:
    """Render a JSON report as table (plain text), json, markdown or csv."""
    if fmt == "json":
        return json.dumps(report, indent=2)
    body = rows(report)
    note = (
        f"{report['experiment']}: median of {report['repetitions']} repetition(s); "
        f"aborted sessions (not intelligible): {report['aborted_sessions']}"
    )
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["Count", report["experiment"], "min-max"])
        w.writerows(body)
        w.writerow(["Aborted sessions", str(report["aborted_sessions"]), ""])
        return buf.getvalue()
    if fmt == "markdown":
        lines = [
            f"| Count | {report['experiment']} | min–max |",
            "| :-- | :-: | :-: |",
            *[f"| {a} | {b} | {c} |" for a, b, c in body],
            "",
            f"_{note}_",
        ]
        return "\n".join(lines)
    if fmt == "table":
        w0 = max(len(a) for a, _, _ in body)
        w1 = max(len(b) for _, b, _ in body)
        lines = [f"{'Count':<{w0}}  {report['experiment']}"]
        lines += [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in body]
        lines.append(note)
        return "\n".join(lines)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
