"""`pxp run --grid grid.toml` and `pxp report --study NAME`: grids as named studies (docs/research.md, Grids and
comparisons).

The grid file's format is documented in pxp.running.pxp.controlled.grid. The experiments run in this process,
one after another (each with its repetitions concurrent, as `pxp run`); a paused experiment does
not stop the others (exit 2 at the end, each resumable with `pxp run --resume NAME`). With
`--distributed` (PostgreSQL) every repetition of every experiment is queued at once for the
`pxp worker`s and the study waits for all of them (pxp.cli.held.run_study_held).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pxp.cli.common import confirm_cost, dump, err, fail, state

#: `pxp run` options a grid run takes from the command line (the rest come from the file)
GRID_OPTIONS = ("concurrency",)


def run_grid(path: Path, *, given: list[str], concurrency: int, fmt: str, progress: bool, estimate_only: bool,
             max_usd: float, yes: bool, distributed: bool = False) -> None:
    """Check the whole grid, create one experiment per point, run them and print the study report.

    `given`: the `pxp run` options given on the command line (only --concurrency applies, overriding
    the file's for this process; with `distributed` the workers' own limits apply).
    """
    from pxp.running.pxp.config import RunError
    from pxp.running.pxp.controlled.grid import (
        GridError,
        create_study,
        prepare_study,
        study_estimate,
        study_estimate_lines,
    )

    extra = [o for o in given if o not in GRID_OPTIONS]
    if extra:
        fail(f"--grid takes the run options from {path} ([run] and [grid]), not "
             f"{', '.join('--' + o.replace('_', '-') for o in extra)}")
    if fmt not in ("table", "json"):
        fail(f"--grid prints table or json, not {fmt!r}")
    engine = state.engine(must_exist=estimate_only)
    try:
        study, estimates = prepare_study(engine, path)
    except (GridError, RunError) as e:
        fail(str(e))
    est = study_estimate(study, estimates)
    if estimate_only:
        if fmt == "json":
            dump(est)
        else:
            typer.echo("\n".join(study_estimate_lines(est)))
        return
    if distributed:
        from pxp.running.workers.queue_schema import QueueError, ensure_schema

        try:
            ensure_schema(engine)  # on SQLite: one line before anything is created
        except QueueError as e:
            fail(str(e))
    unpriced = [spec for e in estimates.values() for spec in e.unpriced]
    confirm_cost(est["total"]["usd"], lambda: study_estimate_lines(est), max_usd, yes, study=True,
                 unpriced=list(dict.fromkeys(unpriced)))
    try:
        exps = create_study(engine, study, estimates)
    except (RunError, ValueError) as e:
        fail(str(e))
    from pxp.cli.held import report_paused

    if distributed:
        outcomes = _run_queued(engine, study.name, [(exp.id or 0, exp.name) for exp in exps], progress)
    else:
        outcomes = _run_in_process(engine, study.name, exps, progress,
                                   concurrency if "concurrency" in given else None)
    print_study(study.name, fmt)
    if report_paused(outcomes, distributed=distributed, study=study.name):
        raise typer.Exit(2)


def _run_in_process(engine: Any, study: str, exps: list[Any], progress: bool, in_flight: int | None) -> list[Any]:
    """The experiments one after another in this process, as `pxp run` runs each; their outcomes."""
    from pxp.cli.held import run_held

    outcomes = []
    for i, exp in enumerate(exps, start=1):
        err.print(f"study {study}: experiment {i}/{len(exps)} {exp.name}", highlight=False, markup=False,
                  soft_wrap=True)
        outcomes.append(run_held(engine, exp.id or 0, exp.name, show_progress=progress, concurrency=in_flight,
                                 paused_note=f"{exp.name} is paused (the study's later experiments are stored, "
                                             "not run)"))
    return outcomes


def _run_queued(engine: Any, study: str, exps: list[tuple[int, str]], progress: bool) -> list[Any]:
    """Every repetition of every experiment queued for the workers at once; their outcomes."""
    from pxp.cli.held import run_study_held

    err.print(f"study {study}: {len(exps)} experiment(s) queued for `pxp worker`s", highlight=False, markup=False,
              soft_wrap=True)
    return run_study_held(engine, exps, show_progress=progress)


def print_study(study: str, fmt: str, *, seed: int = 0) -> None:
    """`pxp report --study NAME`: Table 1 side by side and the paired comparisons (table or json)."""
    from pxp.analysis.report import ReportError
    from pxp.analysis.study import study_json, study_lines

    if fmt not in ("table", "json"):
        fail(f"--study prints table or json, not {fmt!r}")
    try:
        rep = study_json(state.reader(), study, seed=seed)
    except ReportError as e:
        fail(str(e))
    if fmt == "json":
        dump(rep)
    else:
        typer.echo("\n".join(study_lines(rep)))
