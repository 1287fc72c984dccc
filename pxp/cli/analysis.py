"""`pxp report` and `pxp validate`: the papers' Table 1 and the conformance check (DESIGN §2, §8)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pxp.cli.common import app, err, fail, out, state

# --- report / validate --------------------------------------------------------------------


@app.command("report")
def report_cmd(
    experiment: Annotated[list[str] | None, typer.Option(
        "--experiment", help="Experiment name or id; repeat it for experiments side by side.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json, markdown or csv.")] = "table",
    by: Annotated[str | None, typer.Option(
        "--by", help="One column per annotator, label or dataset of the experiments (e.g. h1 vs h2).")] = None,
    calls: Annotated[bool, typer.Option("--calls", help="Also the LLM call totals per run (tokens, cost).")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="The whole machine performance series (default: first, last, best, every tenth).")
    ] = False,
    compare: Annotated[bool, typer.Option(
        "--compare", help="Two experiments on the same instances: paired differences, bootstrap 95% CI, "
        "McNemar's test.")] = False,
    agreement: Annotated[bool, typer.Option(
        "--agreement", help="Inter-annotator agreement (Cohen's κ, Krippendorff's α) and disagreements instead.")
    ] = False,
    study: Annotated[str | None, typer.Option(
        "--study", help="A study (`pxp run --grid`): Table 1 side by side and the paired comparison of each "
        "two machines on the same instances.")] = None,
) -> None:
    """Print the papers' Table 1 for an experiment (or several side by side)."""
    from pxp.analysis.report import FORMATS, ReportError, render_many, report_json, reports_by

    if study is not None:
        from pxp.cli.grid import print_study

        return print_study(study, fmt) if not experiment else fail("--study and --experiment cannot be combined")
    if not experiment:
        fail("--experiment (or --study) is required")

    if compare:
        from pxp.cli.compare import print_comparison

        return print_comparison(experiment, fmt)
    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if agreement:
        if by is not None or calls or full:
            fail("--agreement takes no --by, --calls or --full")
        _agreement(experiment, fmt)
        return
    try:
        if by is not None:
            reps = reports_by(state.reader(), experiment, by)
        else:
            reps = [report_json(state.reader(), e) for e in experiment]
    except ReportError as e:
        fail(str(e))
    if not reps:
        fail("no finished or aborted sessions to count")
    totals = _call_totals(experiment) if calls else {}
    if fmt == "json" and calls:
        for rep in reps:
            if rep["experiment"] in totals:
                rep["calls"] = totals[rep["experiment"]]
    typer.echo(render_many(reps, fmt, full=full))
    if calls and fmt != "json":
        from pxp.cli.llm import print_calls, print_versus  # the LLM commands' module: only with --calls

        for name, t in totals.items():
            print_calls(name, t["rows"], t["total"])
            if t.get("estimate"):
                print_versus(name, t["estimate"])


def _agreement(experiment: list[str], fmt: str) -> None:
    """`pxp report --agreement`: κ and α per field over the experiments' cases (docs/research.md, Agreement)."""
    from pxp.analysis.agreement import disagreements, render_agreement
    from pxp.analysis.queries import Selection
    from pxp.analysis.report import ReportError, agreement_json, experiment_ids

    try:
        rep = agreement_json(state.reader(), experiment)
        ids, _ = experiment_ids(state.reader(), experiment)
    except ReportError as e:
        fail(str(e))
    dis = disagreements(state.reader(), Selection(experiments=tuple(sorted(set(ids)))))
    typer.echo(render_agreement(rep, dis, fmt))


def _call_totals(experiments: list[str]) -> dict[str, dict[str, Any]]:
    """LLM call totals per run of each named experiment, keyed by experiment name."""
    from pxp.analysis.calls import call_totals, grand_total
    from pxp.storage.core import experiment_row

    out_: dict[str, dict[str, Any]] = {}
    for e in experiments:
        exp = experiment_row(state.reader(), name_or_id=e)
        if exp is not None:
            rows = call_totals(state.reader(), exp.id)
            out_[exp.name] = {"rows": rows, "total": grand_total(rows)}
            if exp.config.get("estimate"):  # made by `pxp run` before the run: shown beside the actual
                from pxp.running.pxp.controlled.estimate_text import versus_actual

                out_[exp.name]["estimate"] = versus_actual(exp.config["estimate"], rows)
    return out_


@app.command("validate")
def validate_cmd(
    experiment: Annotated[str | None, typer.Option("--experiment", help="Name or id.")] = None,
) -> None:
    """Check every stored session against the protocol (docs/protocol.md); exit 1 listing each violation."""
    from pxp.analysis.validate import validate
    from pxp.storage.core import experiment_row

    engine = state.reader()
    exp_id = None
    if experiment is not None:
        exp = experiment_row(engine, name_or_id=experiment)
        if exp is None:
            fail(f"no experiment named {experiment!r}")
        exp_id = exp.id
    checked, violations = validate(engine, experiment_id=exp_id)
    for v in violations:
        out.print(str(v), highlight=False, markup=False, soft_wrap=True)
    if violations:
        err.print(f"{len(violations)} violation(s) in {checked} session(s)")
        raise typer.Exit(1)
    out.print(f"{checked} session(s) conform", highlight=False)
