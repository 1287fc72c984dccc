"""`pxp scorekeeping ...`: instances, runs, clembench import/export and the report of the scorekeeping game
(docs/research.md, Scorekeeping game; the game of docs/protocol.md, "The scorekeeping game", scored as clembench
scores it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pxp.cli.common import app, err, fail, named_path, require_settings, state
from pxp.protocols.text import strip_bom

if TYPE_CHECKING:
    from pxp.protocols.scorekeeping.instances import Instance

sk_app = typer.Typer(help="The scorekeeping game (private and shared): instances, runs, clembench results, report.",
                     no_args_is_help=True)
app.add_typer(sk_app, name="scorekeeping")


def _keep_db() -> None:
    """A command that fails after storing something keeps the database it created (and says so)."""
    state.keep()


@sk_app.command("instances")
def instances_cmd(
    domain: Annotated[list[str] | None, typer.Option(
        "--domain", help="travel-booking or job-interview; repeat it (default: both).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the generator (default 2026).")] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="Instances per domain.")] = 10,
    out_file: Annotated[Path | None, typer.Option(
        "--out", parser=named_path, help="Write instances.json here (default: stdout).")] = None,
) -> None:
    """Generate game instances as clembench's instances.json (experiments → game_instances)."""
    from pxp.protocols.scorekeeping.instances import DEFAULT_SEED, DOMAINS, InstanceError, generate_experiments

    if n < 1:
        fail(f"--n must be at least 1, not {n}")
    try:
        data = generate_experiments(seed=DEFAULT_SEED if seed is None else seed, n=n,
                                    domains=tuple(domain) if domain else tuple(DOMAINS))
    except InstanceError as e:
        fail(f"--domain: {e}")
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if out_file is None:
        typer.echo(text)
        return
    try:
        out_file.write_text(text + "\n", encoding="utf-8")
    except OSError as e:
        fail(f"{out_file}: cannot write: {e.strerror or e}")
    count = sum(len(x["game_instances"]) for x in data["experiments"])
    typer.echo(f"wrote {count} instances to {out_file}")


def _load_instances(path: Path) -> list[Instance]:
    from pxp.protocols.scorekeeping.instances import InstanceError, parse_instances

    try:
        data = json.loads(strip_bom(path.read_text(encoding="utf-8")))
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror or e}")
    except json.JSONDecodeError as e:
        fail(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}")
    except RecursionError:
        fail(f"{path}: arrays or objects nested too deeply to read; not clembench's instances.json")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 text: {e.reason}")
    try:
        return list(parse_instances(data))
    except InstanceError as e:
        fail(f"{path}: {e}")


@sk_app.command("run")
def run_cmd(
    answerer: Annotated[str, typer.Option("--answerer", help="simulated or provider:model.")],
    name: Annotated[str, typer.Option("--name", help="The game's name; a re-run resumes it.")],
    instances: Annotated[Path | None, typer.Option(
        "--instances", help="A clembench instances.json (default: both domains from --seed).",
        parser=named_path)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Instances and simulated answerer seed (2026).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes (and LLM calls) at once.")] = 4,
    probe_accuracy: Annotated[float, typer.Option(help="Simulated: chance a probe reply is right.")] = 0.9,
    slot_accuracy: Annotated[float, typer.Option(help="Simulated: chance an answer gives the value.")] = 0.9,
    format_error_rate: Annotated[float, typer.Option(help="Simulated: chance a reply has no tag.")] = 0.02,
    latency_ms: Annotated[float, typer.Option(min=0.0, help="Simulated: delay of every reply (ms).")] = 0.0,
    temperature: Annotated[float | None, typer.Option(min=0.0, help="LLM sampling temperature.")] = None,
) -> None:
    """Play every instance with the answerer; finished episodes are stored whole and skipped on a re-run."""
    from pxp.llm.base import LLMConfigError
    from pxp.protocols.scorekeeping.instances import DEFAULT_SEED
    from pxp.running.scorekeeping.runs import RunError, RunSettings, run_game

    require_settings("models")
    insts = _load_instances(instances) if instances is not None else None
    for opt, v in (("--probe-accuracy", probe_accuracy), ("--slot-accuracy", slot_accuracy),
                   ("--format-error-rate", format_error_rate)):
        if not 0.0 <= v <= 1.0:
            fail(f"{opt} must be in [0, 1], not {v}")
    settings = RunSettings(name=name, answerer=answerer.strip(), seed=DEFAULT_SEED if seed is None else seed,
                           concurrency=concurrency,
                           instances=insts,
                           probe_accuracy=probe_accuracy, slot_accuracy=slot_accuracy,
                           format_error_rate=format_error_rate, latency_s=max(0.0, latency_ms) / 1000,
                           temperature=temperature)
    try:
        result = run_game(state.engine(), settings)
    except (RunError, LLMConfigError) as e:
        fail(str(e))
    except KeyboardInterrupt:
        _keep_db()
        fail(f"interrupted; the finished episodes are stored: re-run `pxp scorekeeping run --name {name} "
             f"--answerer {answerer}` to resume", code=130)
    typer.echo(f"game {result.game!r}: {result.stored} episodes stored, {result.skipped} already there, "
               f"{result.total} in all ({result.seconds:.1f} s)")
    if result.failed is not None:
        _keep_db()
        fail(f"paused: {result.failed}; re-run to resume")


@sk_app.command("import-clembench")
def import_cmd(
    folder: Annotated[Path, typer.Argument(help="A clembench results folder: a model pair, a clembench-runs version "
                                               "(v1.0/<pair>/privateshared/...) or the runs root.", parser=named_path)],
    name: Annotated[str, typer.Option("--name", help="The game to import into.")],
    keep_good: Annotated[bool, typer.Option(
        "--keep-good", help="Store the good episodes even when some are refused (exit 1 all the same).")] = False,
) -> None:
    """Read, validate and score every episode; a bad one is one error line (file and field), and then
    nothing is stored (all or nothing) unless --keep-good."""
    from pxp.data.importers.common import shown_problems
    from pxp.running.scorekeeping.games import GameError, import_clembench

    try:
        res = import_clembench(state.engine(), folder, name, keep_good=keep_good)
    except GameError as e:
        fail(str(e))
    for line in shown_problems(res.errors):
        err.print(f"[red]error:[/red] {escape(line)}", highlight=False, soft_wrap=True)
    for line in res.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(line)}", highlight=False, soft_wrap=True)
    if res.errors and not keep_good:
        typer.echo(f"game {name!r}: nothing imported: {len(res.errors)} episode(s) refused (fix them, or "
                   "--keep-good to store the others)")
    else:
        typer.echo(f"game {name!r}: {res.stored} episodes imported, {res.skipped} already there, "
                   f"{len(res.errors)} refused")
    if res.errors:
        if res.stored or res.skipped:
            _keep_db()
        raise typer.Exit(1)


@sk_app.command("export")
def export_cmd(
    name: Annotated[str, typer.Option("--name", help="The game to export.")],
    out_dir: Annotated[Path, typer.Option("--out", parser=named_path, help="The results folder to write.")],
) -> None:
    """Write the game's episodes as clembench does (interactions.json, scores.json, instance.json)."""
    from pxp.running.scorekeeping.games import GameError, export_game

    try:
        written = export_game(state.reader(), name, out_dir)
    except GameError as e:
        fail(str(e))
    except OSError as e:
        fail(f"{out_dir}: cannot write: {e.strerror or e}")
    typer.echo(f"wrote {len(written)} episodes to {out_dir}")


@sk_app.command("report")
def report_cmd(
    name: Annotated[list[str], typer.Option("--name", help="A game; repeat it for games side by side.")],
    fmt: Annotated[str, typer.Option("--format", help="table, json or csv (one row per episode).")] = "table",
) -> None:
    """Episode scores and the leaderboard (% Played, Quality Score and its std per model)."""
    from pxp.analysis.scorekeeping import FORMATS, render, report
    from pxp.running.scorekeeping.games import GameError

    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    try:
        rep = report(state.reader(), name)
    except GameError as e:
        fail(str(e))
    if not rep["episodes"]:
        fail(f"no stored episodes in {', '.join(repr(n) for n in name)}")
    typer.echo(render(rep, fmt))
