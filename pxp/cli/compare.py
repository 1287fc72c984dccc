"""`pxp report --experiment A --experiment B --compare`: two models on the same instances (docs/research.md, Grids and
comparisons)."""

from __future__ import annotations

import typer

from pxp.cli.common import dump, fail, state


def print_comparison(experiments: list[str], fmt: str, *, seed: int = 0) -> None:
    """Paired differences, bootstrap 95 % intervals and McNemar's test (pxp.analysis.statistics)."""
    from pxp.analysis.statistics import ComparisonError, compare_experiments, comparison_csv, comparison_lines

    if len(experiments) != 2:
        fail(f"--compare needs exactly two experiments (--experiment A --experiment B), got {len(experiments)}")
    if fmt not in ("table", "json", "csv"):
        fail(f"--compare prints table, json or csv, not {fmt!r}")
    try:
        cmp = compare_experiments(state.reader(), experiments[0], experiments[1], seed=seed)
    except ComparisonError as e:
        fail(str(e))
    if fmt == "json":
        dump(cmp)
    elif fmt == "csv":
        typer.echo(comparison_csv(cmp), nl=False)
    else:
        typer.echo("\n".join(comparison_lines(cmp)))
