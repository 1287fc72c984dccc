"""`pxp run` (controlled experiments: new, `--like`, `--resume`).

Exit codes of `pxp run`: 0 finished; 1 error (one line); 2 some repetition paused
(a transient API failure: `pxp run --resume NAME` retries it); 130 interrupted (Ctrl-C,
also resumable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from pxp.cli.common import app, confirm_cost, dump, err, fail, named_path, require_settings, state
from pxp.running.pxp.config import DEFAULT_SPLIT, LEARN_DEFAULT, RunConfig

if TYPE_CHECKING:
    from pxp.running.pxp.controlled.estimate import Estimate

@dataclass(frozen=True)
class RunOptions:
    """The `pxp run` options that make a RunConfig, typed (no `locals()`).

    `split` is None for every instance (`--split all`) or when not given; the `sim_*`
    options go into RunConfig.simulated.
    """

    dataset: str | None
    machine: str
    human: str
    reps: int
    n: int
    k: int
    seed: int
    split: str | None
    val_split: str
    test_split: str
    shuffle: bool
    checker: str
    base_url: str | None
    temperature: float | None
    max_tokens: int | None
    learn: bool
    learn_metric: str
    eval_at_start: bool
    concurrency: int
    sim_accuracy: float
    sim_adopt: float
    sim_mislead: float
    sim_latency: float
    eval_every: int
    eval_sample: int | None
    learn_sample: int | None
    carry: str
    probe: bool = False
    sim_probe_accuracy: float = 0.8

    def simulated(self) -> dict[str, float]:
        return {"accuracy": self.sim_accuracy, "adopt": self.sim_adopt, "mislead": self.sim_mislead,
                "latency": self.sim_latency, "probe_accuracy": self.sim_probe_accuracy}

    def new_config(self, dataset: str, split: str | None) -> RunConfig:
        """The config of a new run (`split` resolved by the caller)."""
        return RunConfig(
            dataset=dataset, split=split, val_split=self.val_split or None, test_split=self.test_split or None,
            machine=self.machine, human=self.human, reps=self.reps, n=self.n, k=self.k, seed=self.seed,
            shuffle=self.shuffle, checker=self.checker, base_url=self.base_url, temperature=self.temperature,
            max_tokens=self.max_tokens, learn=self.learn, learn_metric=self.learn_metric,
            eval_at_start=self.eval_at_start, concurrency=self.concurrency, eval_every=self.eval_every,
            eval_sample=self.eval_sample, learn_sample=self.learn_sample, carry=self.carry,
            probe=self.probe,
            simulated=self.simulated() if self.machine == "simulated" else {},
        )

    def override(self, cfg: RunConfig, given: Sequence[str]) -> RunConfig:
        """`cfg` (an experiment's stored config, `--like`) with the options given on the command line."""
        fields = {f.name for f in dataclasses.fields(RunConfig)}
        changes: dict[str, Any] = {o: getattr(self, o) for o in given if o in fields}
        sim = {o.removeprefix("sim_"): float(getattr(self, o)) for o in given if o.startswith("sim_")}
        if sim:
            changes["simulated"] = {**cfg.simulated, **sim}
        return dataclasses.replace(cfg, **changes)


#: the option names of RunOptions, as `typer` names the parameters of run_cmd
_CONFIG_OPTIONS = tuple(f.name for f in dataclasses.fields(RunOptions))


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` was given (command line or environment), not left at its default."""
    src = ctx.get_parameter_source(name)
    return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")


def _carry_option(value: str) -> str:
    """--carry as all, last:M or tokens:T (a bad value: one line, exit 2)."""
    from pxp.running.pxp.config import RunError, parse_carry

    try:
        kind, num = parse_carry(value)
    except RunError as e:
        raise typer.BadParameter(str(e)) from None
    return kind if num is None else f"{kind}:{num}"


_RUN_HELP = (
    "Run a controlled experiment: INTERACT over R concurrent repetitions, LEARN, machine performance."
    "\n\nPrints Table 1 (median and min–max over repetitions), the machine performance series and a "
    "cost/latency summary. Exit 2 when a repetition paused on an API failure, 130 on Ctrl-C; "
    "`pxp run --resume NAME` continues from the database. `--like NAME` repeats an experiment's stored "
    "config (options given on the command line override it)."
)


@app.command("run", help=_RUN_HELP)
def run_cmd(
    ctx: typer.Context,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Dataset name.")] = None,
    machine: Annotated[str, typer.Option("--machine", help="simulated or provider:model.")] = "simulated",
    human: Annotated[str, typer.Option("--human", help="proxy (the database of expert answers).")] = "proxy",
    reps: Annotated[int, typer.Option("--reps", help="Repetitions R (run at the same time).")] = 1,
    n: Annotated[int, typer.Option("--n", help="Message bound n.")] = 10,
    k: Annotated[int, typer.Option("--k", help="REJECT allowed after message k.")] = 3,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    split: Annotated[
        str | None,
        typer.Option("--split", help="Split to interact on, or all (default: train if the dataset has one, "
                     "else all)."),
    ] = None,
    val_split: Annotated[str, typer.Option("--val-split", help="LEARN's validation split.")] = "val",
    test_split: Annotated[str, typer.Option("--test-split", help="Split for machine performance.")] = "test",
    name: Annotated[str | None, typer.Option("--name", help="Experiment name.")] = None,
    shuffle: Annotated[
        bool, typer.Option("--shuffle/--no-shuffle", help="Shuffle instance order per repetition.")
    ] = False,
    learn: Annotated[
        bool, typer.Option("--learn/--no-learn", help="Keep a session's context only if validation accuracy holds.")
    ] = LEARN_DEFAULT,
    learn_metric: Annotated[
        str, typer.Option("--learn-metric", help="Accuracy LEARN compares: prediction, explanation or both.")
    ] = "both",
    eval_at_start: Annotated[
        bool, typer.Option("--eval-at-start", help="Also evaluate the machine on the test split before session 1.")
    ] = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="LLM calls in flight, shared by all repetitions.")
    ] = 8,
    eval_every: Annotated[int, typer.Option(
        "--eval-every", min=1, help="Machine performance on the test split after every m-th session and the last.")
    ] = 1,
    eval_sample: Annotated[int | None, typer.Option(
        "--eval-sample", min=1, help="Evaluate on a fixed, seeded sample of N test cases (default: the whole split).")
    ] = None,
    learn_sample: Annotated[int | None, typer.Option(
        "--learn-sample", min=1, help="LEARN on a fixed, seeded sample of N validation cases (default: all).")
    ] = None,
    carry: Annotated[str, typer.Option(
        "--carry", callback=_carry_option,
        help="Kept sessions carried into the next prompt: all, last:M or tokens:T (estimated tokens).")
    ] = "all",
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this experiment from the database.")] = None,
    like: Annotated[
        str | None, typer.Option("--like", help="Repeat this experiment's config (options given override).")
    ] = None,
    sim_accuracy: Annotated[float, typer.Option("--sim-accuracy", help="Simulated initial accuracy.")] = 0.6,
    sim_adopt: Annotated[float, typer.Option("--sim-adopt", help="Simulated adoption probability.")] = 0.7,
    sim_mislead: Annotated[
        float, typer.Option("--sim-mislead", help="Simulated: how much an unratified carried session misleads.")
    ] = 0.0,
    sim_latency: Annotated[
        float, typer.Option("--sim-latency", help="Simulated: seconds per call (holds a slot).")
    ] = 0.0,
    probe: Annotated[bool, typer.Option(
        "--probe", help="Common-ground probe: after each human message ask the machine private yes/no "
        "questions the stored session decides (docs/research.md, Common-ground probe).")] = False,
    sim_probe_accuracy: Annotated[
        float, typer.Option("--sim-probe-accuracy", help="Simulated: probability a probe is answered right.")
    ] = 0.8,
    checker: Annotated[str, typer.Option("--checker", help="AGREE: lexical or provider:model.")] = "lexical",
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible server URL.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Generator temperature.")] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Generator max tokens (RAD 300, DRUG 1024).")
    ] = None,
    report_format: Annotated[str, typer.Option(
        "--format", help="table, json, markdown or csv (json and csv carry the whole performance series).")
    ] = "table",
    full: Annotated[bool, typer.Option(
        "--full", help="Print the whole machine performance series (default: first, last, best, every tenth).")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress on stderr.")] = True,
    estimate_only: Annotated[bool, typer.Option(
        "--estimate", help="Print the expected calls, tokens and US dollars and start nothing.")] = False,
    max_usd: Annotated[float, typer.Option(
        "--max-usd", min=0.0, help="A run estimated above this many US dollars (or at an unknown cost) asks first.")
    ] = 20.0,
    yes: Annotated[bool, typer.Option(
        "--yes", help="Run over --max-usd, or at an unknown cost (a model pxp has no price for), without asking.")
    ] = False,
    distributed: Annotated[bool, typer.Option(
        "--distributed", help="PostgreSQL: queue the repetitions for `pxp worker`s and wait for them.")] = False,
    grid: Annotated[Path | None, typer.Option(
        "--grid", help="A TOML grid (machines × datasets × seeds × n, k): one named study, run point by point.",
        parser=named_path)
    ] = None,
) -> None:
    """Run a controlled experiment: INTERACT over R concurrent repetitions, LEARN, machine performance.

    Prints Table 1 (median and min–max over repetitions), the machine performance series and a
    cost/latency summary. Exit 2 when a repetition paused on an API failure and 130 on Ctrl-C:
    `pxp run --resume NAME` continues from the database. `--like NAME` repeats an experiment's
    stored config (options given on the command line override it).
    """
    from pxp.analysis.report import FORMATS
    from pxp.running.pxp.checks import check_config
    from pxp.running.pxp.config import RunError
    from pxp.running.pxp.controlled.estimate import dataset_facts, estimate, store_estimate
    from pxp.running.pxp.controlled.runner import resume_target
    from pxp.running.pxp.experiments import create_experiment, experiment_notes

    require_settings("models", "runs")
    if report_format not in FORMATS:
        fail(f"unknown format {report_format!r} (one of {', '.join(FORMATS)})")
    if grid is not None:  # pxp.cli.grid: the study's options come from the file
        from pxp.cli.grid import run_grid

        return run_grid(grid, given=[o for o in (*_CONFIG_OPTIONS, "name", "resume", "like") if _given(ctx, o)],
                        concurrency=concurrency, fmt=report_format, progress=progress, estimate_only=estimate_only,
                        max_usd=max_usd, yes=yes, distributed=distributed)
    every_instance = split == "all"
    opts = RunOptions(
        dataset=dataset, machine=machine, human=human, reps=reps, n=n, k=k, seed=seed,
        split=None if every_instance else split, val_split=val_split, test_split=test_split, shuffle=shuffle,
        checker=checker, base_url=base_url, temperature=temperature, max_tokens=max_tokens, learn=learn,
        learn_metric=learn_metric, eval_at_start=eval_at_start, concurrency=concurrency,
        sim_accuracy=sim_accuracy, sim_adopt=sim_adopt, sim_mislead=sim_mislead, sim_latency=sim_latency,
        eval_every=eval_every, eval_sample=eval_sample, learn_sample=learn_sample, carry=carry,
        probe=probe, sim_probe_accuracy=sim_probe_accuracy,
    )
    engine = state.engine(must_exist=resume is not None or like is not None or estimate_only)
    given = [o for o in _CONFIG_OPTIONS if _given(ctx, o)]
    try:
        if distributed and not estimate_only:
            from pxp.running.workers.queue_schema import ensure_schema

            ensure_schema(engine)  # SQLite, or an old worker with migrations pending: one line, nothing created
        if resume is not None:
            if like is not None:
                fail("--resume and --like cannot be combined")
            extra = [o for o in given if o != "concurrency"] + (["name"] if name else [])
            if extra:
                fail("--resume continues with the stored config; only --concurrency, --format and --progress apply "
                     f"(got {', '.join('--' + o.replace('_', '-') for o in extra)})")
            exp = resume_target(engine, resume)
            _say_if_interrupted(exp)
            if estimate_only:
                cfg = RunConfig.from_dict(exp.config)
                _print_estimate(estimate(cfg, dataset_facts(engine, cfg)), report_format)
                return
            if exp.status == "finished":
                err.print(f"experiment {exp.name!r} has already finished", highlight=False, markup=False,
                          soft_wrap=True)
        else:
            if like is not None:
                base = resume_target(engine, like)
                cfg = opts.override(RunConfig.from_dict(base.config), given)
                if base.config.get("pxp_version") not in (None, _version()):
                    was = escape(f"{base.name!r} was run with pxp {base.config.get('pxp_version')}")
                    err.print(f"[yellow]note:[/yellow] {was}, this is {_version()}", highlight=False, soft_wrap=True)
            else:
                if dataset is None:
                    fail("--dataset is required (or --resume / --like EXPERIMENT)")
                cfg = opts.new_config(
                    dataset, opts.split if opts.split is not None or every_instance else _default_split(engine, dataset)
                )
            check_config(cfg)  # a bad option is reported as itself, before the estimate
            est = estimate(cfg, dataset_facts(engine, cfg))
            if estimate_only:
                _print_estimate(est, report_format)
                return
            _confirm_cost(est, max_usd, yes)
            exp = create_experiment(engine, cfg, name=name)
            store_estimate(engine, exp.id or 0, est)
            from pxp.llm.models import run_warnings

            for note in run_warnings([cfg.machine, cfg.checker]):
                err.print(f"[yellow]warning:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
            for note in experiment_notes(exp):
                err.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    except (RunError, ValueError) as e:
        fail(str(e))
    _run_and_report(exp.id or 0, exp.name, report_format, progress, concurrency if "concurrency" in given else None,
                    full=full, distributed=distributed)


def _say_if_interrupted(exp: Any) -> None:
    """`--resume` of a run whose process ended without finishing or pausing says so first (no silent death)."""
    from pxp.running.workers.interrupted import Interrupted, is_interrupted

    if is_interrupted(exp):
        line = Interrupted(exp.id or 0, exp.name, exp.heartbeat_at, False).line()
        err.print(f"note: {line}; resuming it", highlight=False, markup=False, soft_wrap=True)


def _print_estimate(est: Estimate, fmt: str) -> None:
    """`--estimate`: the figures as JSON (`--format json`) or a table; nothing is started."""
    from pxp.running.pxp.controlled.estimate_text import estimate_lines

    if fmt == "json":
        dump(est.as_json())
    else:
        typer.echo("\n".join(estimate_lines(est)))


def _confirm_cost(est: Estimate, max_usd: float, yes: bool) -> None:
    """Over `--max-usd` a real-LLM run asks (typer.confirm); without a terminal it needs --yes."""
    from pxp.running.pxp.controlled.estimate_text import estimate_lines

    confirm_cost(est.usd, lambda: estimate_lines(est), max_usd, yes, unpriced=est.unpriced)


def _version() -> str:
    from pxp import __version__

    return __version__


def _default_split(engine: Any, dataset: str) -> str | None:
    """train when the dataset has a train split, else every instance."""
    from pxp.storage.store import dataset_instances, db_session, find_dataset

    with db_session(engine) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None or ds.id is None:
            return None
        return DEFAULT_SPLIT if dataset_instances(db, dataset_id=ds.id, split=DEFAULT_SPLIT) else None


def _run_and_report(experiment_id: int, name: str, fmt: str, show_progress: bool, concurrency: int | None,
                    *, full: bool = False, distributed: bool = False) -> None:
    from pxp.analysis.report import render, report_json
    from pxp.cli.held import report_paused, run_held
    from pxp.running.pxp.controlled.progress import render_usage
    from pxp.running.pxp.controlled.runner import usage_summary
    from pxp.storage.faults import describe, is_database_error, retrying, shown_database

    engine = state.engine()
    outcome = run_held(engine, experiment_id, name, show_progress=show_progress, concurrency=concurrency,
                       distributed=distributed)
    try:  # a read: tried again while the database is briefly away
        # csv and json carry the whole performance series; table and markdown a summary unless --full
        report = retrying(lambda: render(report_json(engine, name), fmt, full=full or fmt == "csv"))
        summary = render_usage(retrying(lambda: usage_summary(engine, experiment_id)), outcome.seconds)
    except Exception as exc:  # the database went away with the run: its pause lines still say what to do
        if not is_database_error(exc):
            raise
        if not outcome.paused:
            fail(f"{name!r} finished, but its report could not be read: the database {shown_database(engine)} "
                 f"failed: {describe(exc)}; show it with `pxp report {name}`")
        report, summary = None, []
    if report is not None:
        typer.echo(report)
    if fmt in ("table", "markdown"):
        typer.echo("\n".join(summary))
    elif summary:
        err.print("\n".join(summary), highlight=False, markup=False, soft_wrap=True)
    if report_paused([outcome], distributed=distributed):
        raise typer.Exit(2)
