"""`pxp export`: an experiment's D, M and C tables, evaluations, calls and probes (DESIGN §4, §8)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pxp.cli.common import app, fail, named_path, out, state

_EXPORT_HELP = (
    "Export an experiment's D, M and C tables, evaluations, calls and probes into directory --out."
    "\n\nFiles: experiment.json (config and column lists), sessions.EXT (D), messages.EXT (M), "
    "contexts.EXT (C), evaluations.EXT, calls.EXT and probes.EXT (the common-ground probe of "
    "`pxp run --probe`; no rows without it), EXT being the format. messages.jsonl is in the "
    "transcripts format: `pxp import transcripts OUT/messages.jsonl --name NEW` reads it back."
)


@app.command("export", help=_EXPORT_HELP)
def export_cmd(
    experiment: Annotated[str, typer.Option("--experiment", help="Experiment name or id.")],
    out_dir: Annotated[Path, typer.Option("--out", parser=named_path, help="Directory to write the tables into.")],
    fmt: Annotated[str, typer.Option("--format", help="jsonl, csv or parquet.")] = "jsonl",
) -> None:
    """Export an experiment's D, M and C tables, evaluations, calls and probes into directory --out.

    Files: experiment.json (config and column lists), sessions.EXT (D), messages.EXT (M),
    contexts.EXT (C), evaluations.EXT, calls.EXT, probes.EXT, with EXT the format. messages.jsonl is in
    the transcripts format: `pxp import transcripts OUT/messages.jsonl --name NEW` reads it back.
    """
    from pxp.analysis.export import ExportError, export_experiment

    try:
        res = export_experiment(state.reader(), experiment, out_dir, fmt)
    except ExportError as e:
        fail(str(e))
    rows = ", ".join(f"{k} {v}" for k, v in res.rows.items())
    out.print(f"exported {experiment!r} to {res.directory} ({rows})", highlight=False, markup=False)
