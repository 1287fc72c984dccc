"""Table 1 of the papers for an experiment, and its renderings (table, json, markdown, csv).

One code path for `pxp report` and the analytics page; SQLAlchemy Core only, so `pxp report` loads no ORM
(docs/development.md, "Start-up").
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, func
from sqlalchemy import select as sa_select

from pxp.analysis.common_ground import probe_sessions, probe_summary, render_probes
from pxp.analysis.queries import GROUP_BY, AnalysisError, R, S, Selection, cached
from pxp.analysis.tables import table1, table1_by
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, METRICS, Table1, table1_rows
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.series import METRIC_NAMES, performance_series, render_series
from pxp.storage.core import ExperimentRow, experiment_row

FORMATS = ("table", "json", "markdown", "csv")


class ReportError(PxpError, LookupError):
    """The experiment asked for does not exist."""


def experiment_table(engine: Engine, exp: ExperimentRow) -> Table1:
    """Table 1 over the experiment's repetitions (pxp.analysis.tables, the page's code path).

    Open sessions are left out; a repetition counts once it has a finished or aborted session.
    """
    return table1(engine, Selection(experiments=(exp.id,)), n=exp.n)


def report_json(engine: Engine, name_or_id: str) -> dict[str, Any]:
    """The JSON report of one experiment (shape documented in docs/research.md, Exports)."""
    exp = experiment_row(engine, name_or_id=name_or_id)
    if exp is None:
        raise ReportError(f"no experiment named {name_or_id!r}")
    rep = experiment_table(engine, exp).as_json(exp.name)
    perf = performance_series(engine, exp.id)  # machine performance (Figure 2), when evaluated
    if perf:
        line = schedule_line(exp.config)
        for series in perf.values():  # which schedule produced each series (docs/research.md, Evaluation schedules)
            series["schedule"] = line
        rep["performance"] = perf
    reasons = aborted_by_reason(engine, [exp.id])
    if reasons:
        rep["aborted_by_reason"] = reasons
    probes = probe_sessions(engine, [exp.id])  # the common-ground probe, when run
    if probes:
        rep["probes"] = {"summary": probe_summary(probes), "sessions": probes}
    return rep


def aborted_by_reason(engine: Engine, experiment_ids: Sequence[int] = ()) -> dict[str, int]:
    """How many sessions of the experiments (all when none are given) aborted, by reason
    (pxp.tasks.spec.FORMAT_KINDS; "other" for any other), most first; cached by data version."""
    ids = tuple(sorted(set(experiment_ids)))
    return dict(cached(engine, "aborted_by_reason", ids, lambda: _aborted_by_reason(engine, ids)))


def _aborted_by_reason(engine: Engine, experiment_ids: Sequence[int]) -> dict[str, int]:
    reason = S.c.abort_reason
    q = (sa_select(reason, func.count()).select_from(S.join(R, R.c.id == S.c.run_id))
         .where(S.c.status == "aborted").group_by(reason)
         .order_by(func.min(S.c.id)))  # ties keep the order the sessions were stored in
    if experiment_ids:
        q = q.where(R.c.experiment_id.in_(list(experiment_ids)))  # bounded: named
    with engine.connect() as conn:
        counted = conn.execute(q).all()  # one row per distinct reason, not one per aborted session
    if not counted:
        return {}
    from pxp.running.pxp.controlled.attempts import format_kind  # the tasks' reply formats: only when needed

    kinds: Counter[str] = Counter()
    for text, n in counted:
        kinds[format_kind(text) or "other"] += n
    return dict(kinds.most_common())


def schedule_line(config: dict[str, Any]) -> str:
    """Which evaluation schedule produced the performance series (docs/research.md, Evaluation schedules), in one
    line."""
    try:
        cfg = RunConfig.from_dict(config)
    except TypeError:  # a config without the fields a RunConfig needs: the papers' schedule
        return "evaluated after every session on the whole test split"
    line = f"evaluated {cfg.schedule_text()}"
    if cfg.learn and cfg.learn_sample:
        line += f"; LEARN on a seeded sample of {cfg.learn_sample} {cfg.val_split or 'val'} cases"
    if cfg.carry != "all":
        line += f"; carried context: {cfg.carry}"
    return line


def experiment_ids(engine: Engine, names_or_ids: list[str]) -> tuple[list[int], int]:
    """The ids of the named experiments (name or numeric id) and their largest message bound n."""
    ids, n = [], 1
    for name in names_or_ids:
        exp = experiment_row(engine, name_or_id=name)
        if exp is None:
            raise ReportError(f"no experiment named {name!r}")
        ids.append(exp.id)
        n = max(n, exp.n)
    return ids, n


def agreement_json(engine: Engine, names_or_ids: list[str]) -> dict[str, Any]:
    """Inter-annotator agreement over the named experiments' cases (pxp.analysis.agreement):
    `{"agreement": {field: {"krippendorff_alpha": a, "pairs": {"a1|a2": {"cohen_kappa": k, "n": m}}}}}`."""
    from pxp.analysis.agreement import agreement_report  # pandas and krippendorff: only when asked for

    ids, _ = experiment_ids(engine, names_or_ids)
    return agreement_report(engine, Selection(experiments=tuple(sorted(set(ids)))))


def reports_by(engine: Engine, names_or_ids: list[str], by: str) -> list[dict[str, Any]]:
    """One report per group (annotator, label, dataset or experiment) of the named experiments,
    each Table 1 over its repetitions (the paper's DRUG-h1 / DRUG-h2 columns); the analytics
    page's columns of the same name."""
    if by not in GROUP_BY:
        raise ReportError(f"unknown grouping {by!r} (one of {', '.join(GROUP_BY)})")
    ids, n = experiment_ids(engine, names_or_ids)
    tables = table1_by(engine, Selection(experiments=tuple(sorted(set(ids)))), by, n=n)
    return [t.as_json(group or "(none)") for group, t in tables.items()]


def render(report: dict[str, Any], fmt: str, *, full: bool = False) -> str:
    """Render a JSON report as table (plain text), json, markdown or csv.

    Table and markdown summarise a long performance series unless `full`.
    """
    if fmt == "json":
        return json.dumps(report, indent=2)
    return render_many([report], fmt, full=full)


def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_many(reports: list[dict[str, Any]], fmt: str, *, full: bool = False) -> str:
    """Several reports side by side in the papers' layout (one column per experiment or group).

    Each column is `count (proportion)`, median over its repetitions; min–max follows in
    its own column when a report has more than one repetition. Aborted sessions are apart. The CSV is tidy
    instead (table1_csv).
    """
    if fmt not in FORMATS:
        raise AnalysisError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if fmt == "json":
        return json.dumps(reports if len(reports) != 1 else reports[0], indent=2)
    if fmt == "csv":
        return table1_csv(reports, full=full)
    bodies = [table1_rows(r) for r in reports]
    labels = [a for a, _, _ in bodies[0]] if bodies else []
    header = ["Count"]
    cols: list[list[str]] = []
    for r, body in zip(reports, bodies, strict=True):
        header.append(str(r["experiment"]))
        cols.append([b for _, b, _ in body])
        if r["repetitions"] > 1:
            header.append(f"{r['experiment']} min–max" if len(reports) > 1 else "min–max")
            cols.append([c for _, _, c in body])
    table = [[lab, *(c[i] for c in cols)] for i, lab in enumerate(labels)]
    aborted = ["Aborted sessions (apart)"]
    for r in reports:
        aborted.append(str(r["aborted_sessions"]))
        if r["repetitions"] > 1:
            aborted.append("")
    notes = [
        f"{r['experiment']}: median of {r['repetitions']} repetition(s); "
        f"aborted sessions (not intelligible, counted in the total): {r['aborted_sessions']}"
        + (f" (all repetitions, by reason: {reasons_line(r['aborted_by_reason'])})"
           if r.get("aborted_by_reason") else "")
        for r in reports
    ]
    if fmt == "markdown":
        lines = [
            "| " + " | ".join(_md(h) for h in header) + " |",
            "| :-- |" + " :-: |" * (len(header) - 1),
            *["| " + " | ".join(_md(c) for c in row) + " |" for row in [*table, aborted]],
            "",
            *[f"_{_md(n)}_  " for n in notes],
            *[ln for r in reports for ln in render_probes(r, fmt)],
            *_performance(reports, fmt, full),
        ]
        return "\n".join(lines).rstrip()
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table, aborted, strict=True)]
    lines = ["  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(row, widths,
                                                                                               strict=True))).rstrip()
             for row in [header, *table, aborted]]
    lines += notes
    lines += [ln for r in reports for ln in render_probes(r, fmt)]
    lines += _performance(reports, fmt, full)
    return "\n".join(lines)


#: Table 1 as a tidy CSV (docs/research.md, Exports): one row per experiment (or group) and property, one value per
#: cell, units in the header
TABLE1_CSV = ("experiment", "property", "label", "repetitions", "count (sessions)", "total (sessions)",
              "proportion (of total)", "min (sessions)", "max (sessions)", "aborted (sessions)")
#: the machine performance series (`--full`), one row per experiment, split and point
SERIES_CSV = ("experiment", "split", "after session (number)",
              *(f"{m} {s} (accuracy)" for m in METRIC_NAMES for s in ("median", "min", "max")))


def table1_csv(reports: list[dict[str, Any]], *, full: bool = False) -> str:
    """Table 1 as a tidy CSV with the numbers of the JSON report; with `full`, the performance series follows
    after one blank line as a second tidy table."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TABLE1_CSV)
    for r in reports:
        for name in METRICS:
            m = r["metrics"][name]
            w.writerow([r["experiment"], name, METRIC_LABELS[name], r["repetitions"], m["count"], r["total_sessions"],
                        m["proportion"], m["min"], m["max"], r["aborted_sessions"]])
    series = [r for r in reports if r.get("performance")] if full else []
    if series:
        w.writerow([])
        w.writerow(SERIES_CSV)
        for r in series:
            for split, s in r["performance"].items():
                for i, point in enumerate(s["after_session"]):
                    w.writerow([r["experiment"], split, point, *("" if s[stat][m][i] is None else s[stat][m][i]
                                                                 for m in METRIC_NAMES
                                                                 for stat in ("median", "min", "max"))])
    return buf.getvalue()


def reasons_line(counts: dict[str, int]) -> str:
    """E.g. "refusal 3, empty reply 1"."""
    return ", ".join(f"{kind} {n}" for kind, n in counts.items())


def _performance(reports: list[dict[str, Any]], fmt: str, full: bool = False) -> list[str]:
    """The machine performance series of each report that has one (pxp.running.pxp.evaluate)."""
    out: list[str] = []
    for r in reports:
        if r.get("performance"):
            if len(reports) > 1:
                out += ["", f"{r['experiment']}:"]
            out += render_series(r["performance"], fmt, full=full)
            perf = r["performance"]
            line = (perf.get("test") or next(iter(perf.values()))).get("schedule")
            if line:
                out += ["", f"_{_md(line)}_" if fmt == "markdown" else str(line)]
    return out
