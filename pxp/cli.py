"""The `pxp` command line (typer). `--db URL` before or after any command; errors are one clear line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy import Engine
from typer.core import TyperGroup

from pxp.store import get_engine, sqlite_file

_DB_HELP = "Database URL (default: PXP_DATABASE_URL or sqlite:///pxp.db); also accepted after the command."


def hoist_db(args: list[str], commands: dict[str, Any]) -> list[str]:
    """Move `--db URL` / `--db=URL` given after the command to the front (issue 11 §4), so
    `pxp report --db URL ...` and `pxp import csv F --db URL` work as `pxp --db URL ...`.

    Stops at `--`; a command with its own `--db` option keeps it. Two different URLs are refused.
    """
    head, rest, urls = [], list(args), []
    cmd = next((a for i, a in enumerate(rest) if not a.startswith("-")
                and (i == 0 or rest[i - 1] != "--db")), None)
    own = commands.get(cmd) if cmd else None
    if own is not None and any("--db" in getattr(p, "opts", ()) for p in getattr(own, "params", ())):
        return args
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            head += rest[i:]
            break
        if a == "--db" and i + 1 < len(rest):
            urls.append(rest[i + 1])
            i += 2
            continue
        if a.startswith("--db="):
            urls.append(a[len("--db="):])
        else:
            head.append(a)
        i += 1
    if len(set(urls)) > 1:
        raise typer.BadParameter(f"--db given twice with different URLs ({', '.join(urls)})")
    return (["--db", urls[0]] if urls else []) + head


class DbGroup(TyperGroup):
    """pxp's command group: `--db URL` before or after any command (issue 11 §4)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_db(args, dict(self.commands)))


app = typer.Typer(
    cls=DbGroup,
    name="pxp",
    help="Run the PXP intelligibility protocol and measure how intelligible it was.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
import_app = typer.Typer(help="Import transcripts, study datasets, CSV/JSONL, DICOM.",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")

out = Console()
err = Console(stderr=True)


class CliState:
    db: str | None = None
    #: a SQLite file this command created, and the folders it made for it (outermost first)
    created: tuple[Path, list[Path]] | None = None

    def engine(self, *, must_exist: bool = False) -> Engine:
        """The database of a command that creates data (a new SQLite file is announced at the end)."""
        if must_exist:
            return self.reader()
        path = sqlite_file(self.db)
        if path is not None and not path.exists() and self.created is None:
            made = [p for p in reversed(path.parents) if not p.exists()]
            engine = get_engine(self.db)
            self.created = (path, made)
            return engine
        return get_engine(self.db)

    def finish(self, ok: bool) -> None:
        """End of a command: say once that it created a database; a failed command that created
        one and stored nothing in it removes it again (bad input writes nothing)."""
        if self.created is None:
            return
        path, made = self.created
        self.created = None
        from pxp.store import forget_engine, holds_data

        try:
            keep = ok or holds_data(get_engine(self.db))
        except Exception:
            keep = True
        if keep:
            err.print(f"created database {escape(str(path))}", highlight=False, soft_wrap=True)
            return
        forget_engine(self.db)
        for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            f.unlink(missing_ok=True)
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                break

    def reader(self) -> Engine:
        """The database of a command that only reads: it must exist (nothing is created), and a
        read-only SQLite file opens read-only."""
        from pxp.store import StoreError

        try:
            return get_engine(self.db, must_exist=True)
        except StoreError as e:
            fail(str(e))


state = CliState()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line and exit: the user never sees a trace."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def _command_scope() -> Iterator[None]:
    """Around every command: CliState.finish with whether the command succeeded."""
    try:
        yield
    except BaseException as e:
        state.finish(getattr(e, "exit_code", 1) == 0)
        raise
    state.finish(True)


@app.callback()
def _global(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option("--db", help=_DB_HELP),
    ] = None,
) -> None:
    state.db = db
    state.created = None
    ctx.with_resource(_command_scope())


# --- import transcripts ------------------------------------------------------------------


@import_app.command("transcripts")
def import_transcripts_cmd(
    file: Annotated[Path, typer.Argument(help="JSONL, one message per line.")],
    name: Annotated[str, typer.Option("--name", help="Name of the experiment to create.")],
    n: Annotated[int, typer.Option("--n", help="Message bound n.")] = 10,
    k: Annotated[int, typer.Option("--k", help="REJECT allowed after message k.")] = 3,
    task: Annotated[str, typer.Option("--task", help="Task of the instances (rad, drug, text).")] = "text",
    allow_nonconformant: Annotated[bool, typer.Option("--allow-nonconformant")] = False,
) -> None:
    """Import transcripts as an experiment; refuses non-conformant sessions."""
    from pxp.data.common import ImportProblems
    from pxp.data.transcripts import import_transcripts

    try:
        res = import_transcripts(state.engine(), file, name=name, n=n, k=k, task=task,
                                 allow_nonconformant=allow_nonconformant)
    except ImportProblems as e:
        for p in e.problems:
            err.print(f"[red]error:[/red] {escape(p)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    out.print(
        escape(f"imported {res.sessions} sessions ({res.messages} messages) as experiment {res.experiment!r}"),
        highlight=False,
        soft_wrap=True,
    )
    for p in res.nonconformant:
        err.print(f"[yellow]warning:[/yellow] {escape(p)}", highlight=False, soft_wrap=True)


# `pxp run` lives in pxp/cli_runs.py (registered by _register_commands).


# --- report / validate --------------------------------------------------------------------


@app.command("report")
def report_cmd(
    experiment: Annotated[list[str], typer.Option(
        "--experiment", help="Experiment name or id; repeat it for experiments side by side.")],
    fmt: Annotated[str, typer.Option("--format", help="table, json, markdown or csv.")] = "table",
    by: Annotated[str | None, typer.Option(
        "--by", help="One column per annotator, label or dataset of the experiments (e.g. h1 vs h2).")] = None,
    calls: Annotated[bool, typer.Option("--calls", help="Also the LLM call totals per run (tokens, cost).")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="The whole machine performance series (default: first, last, best, every tenth).")
    ] = False,
) -> None:
    """Print the papers' Table 1 for an experiment (or several side by side)."""
    from pxp.report import FORMATS, ReportError, render_many, report_json, reports_by

    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
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
        from pxp.cli_llm import print_calls

        for name, t in totals.items():
            print_calls(name, t["rows"], t["total"])


def _call_totals(experiments: list[str]) -> dict[str, dict[str, Any]]:
    """LLM call totals per run of each named experiment, keyed by experiment name."""
    from pxp.llm.accounting import call_totals, grand_total
    from pxp.store import db_session, find_experiment

    out_: dict[str, dict[str, Any]] = {}
    for e in experiments:
        with db_session(state.reader()) as db:
            exp = find_experiment(db, name_or_id=e)
        if exp is not None and exp.id is not None:
            rows = call_totals(state.reader(), exp.id)
            out_[exp.name] = {"rows": rows, "total": grand_total(rows)}
    return out_


@app.command("validate")
def validate_cmd(
    experiment: Annotated[str | None, typer.Option("--experiment", help="Name or id.")] = None,
) -> None:
    """Check every stored session against DESIGN §1; exit 1 listing each violation."""
    from pxp.store import db_session, find_experiment
    from pxp.validate import validate

    engine = state.reader()
    exp_id = None
    if experiment is not None:
        with db_session(engine) as db:
            exp = find_experiment(db, name_or_id=experiment)
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


# Commands of the other areas register themselves on `app` / `import_app`.
def _register_commands() -> None:
    import importlib

    for mod in ("pxp.cli_data", "pxp.cli_runs", "pxp.cli_llm", "pxp.cli_app"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def main() -> None:
    """Entry point: run the app; any unexpected error becomes one line (PXP_DEBUG=1 for a trace)."""
    _register_commands()
    try:
        app()
    except SystemExit:
        raise
    except Exception as e:
        if os.environ.get("PXP_DEBUG"):
            raise
        from pxp.errors import user_message

        err.print(f"[red]error:[/red] {escape(user_message(e))}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    # run the imported module's app, on which the other areas register their commands
    from pxp.cli import main as _main

    _main()
