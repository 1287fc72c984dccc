"""CLI commands of the LLM area: `pxp calls` (accounting per run), `pxp models` (what a server offers) and
`pxp task` (custom tasks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pxp.cli.common import app, dump, fail, named_path, out, require_settings, state

task_app = typer.Typer(help="Custom tasks: check a TOML/JSON task config, attach it to a dataset.",
                       no_args_is_help=True)
app.add_typer(task_app, name="task")


@app.command("models")
def models_cmd(
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="An OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio), e.g. "
                           "http://localhost:11434/v1; default OPENAI_BASE_URL, else the provider's API.")] = None,
    provider: Annotated[str, typer.Option(
        "--provider", help="openai (any compatible server) or anthropic.")] = "openai",
    model: Annotated[str | None, typer.Option(
        "--model", help="Check that this model is among them (exit 1 with one line when not).")] = None,
) -> None:
    """The models a server offers (its /v1/models), one per line (docs/research.md, Local models)."""
    from pxp.llm.base import LLMConfigError, LLMError
    from pxp.llm.models import served_models
    from pxp.protocols.settings import url_error

    require_settings("models")
    if base_url is not None and url_error(base_url) is not None:  # the options checked before the network
        fail(f"--base-url {base_url!r}: {url_error(base_url)}")
    if provider not in ("openai", "anthropic"):
        fail(f"unknown provider {provider!r} (openai or anthropic)")
    try:
        served = served_models(f"{provider}:{model or 'any'}", base_url)
    except (LLMError, LLMConfigError) as e:
        fail(str(e))
    for m in served:
        out.print(m, highlight=False, markup=False, soft_wrap=True)
    if model is not None and model not in served:
        fail(f"{provider}:{model}: the server does not list this model ({len(served)} listed)")


@app.command("calls")
def calls_cmd(
    experiment: Annotated[str, typer.Option("--experiment", help="Experiment name or id.")],
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    unknown: Annotated[bool, typer.Option(
        "--unknown", help="List each call sent but never answered before a process stopped.")] = False,
) -> None:
    """LLM calls of an experiment per run: calls, errors, tokens, cache, cost, latency."""
    from pxp.analysis.calls import call_totals, grand_total
    from pxp.storage.core import experiment_row

    if fmt not in ("table", "json"):
        fail(f"unknown format {fmt!r} (table or json)")
    engine = state.reader()
    exp = experiment_row(engine, name_or_id=experiment)
    if exp is None:
        fail(f"no experiment named {experiment!r}")
    if unknown:
        from pxp.running.pxp.journal import unknown_calls

        pending = unknown_calls(engine, exp.id)
        if fmt == "json":
            dump({"experiment": exp.name, "unknown": pending})
            return
        t = Table(title=escape(f"LLM calls of {exp.name} whose outcome is unknown"))
        for c in ("sent at", "run", "session", "j", "provider:model", "purpose", "attempt"):
            t.add_column(c, no_wrap=True)
        for p in pending:
            t.add_row(p["sent_at"], str(p["run_id"] or ""), str(p["session_id"] or ""), str(p["j"] or ""),
                      escape(f"{p['provider']}:{p['model']}"), escape(p["purpose"]), str(p["attempt"]))
        Console(width=max(out.width, 120), force_terminal=out.is_terminal, emoji=False).print(t)
        return
    rows = call_totals(engine, exp.id)
    total = grand_total(rows)
    versus = None
    if exp.config.get("estimate"):  # made by `pxp run` before the run: shown beside the actual
        from pxp.running.pxp.controlled.estimate_text import versus_actual

        versus = versus_actual(exp.config["estimate"], rows)
    if fmt == "json":
        dump({"experiment": exp.name, "rows": rows, "total": total, **({"estimate": versus} if versus else {})})
        return
    print_calls(exp.name, rows, total)
    if versus:
        print_versus(exp.name, versus)


def print_versus(name: str, rows: list[dict[str, Any]]) -> None:
    """The estimate made before the run (pxp run) and the actual calls, side by side per purpose."""
    t = Table(title=escape(f"Estimate and actual calls of {name}"))
    for c in ("purpose", "calls est.", "calls", "in est.", "in", "out est.", "out", "cost $ est.", "cost $"):
        t.add_column(c, justify="left" if c == "purpose" else "right", no_wrap=True)

    def usd(v: float | None) -> str:
        return "—" if v is None else f"{v:.4f}"

    for r in rows:
        t.add_row(escape(r["purpose"]), *(f"{r[f'{k}_{w}']:,}" for k in ("calls", "tokens_in", "tokens_out")
                                  for w in ("estimated", "actual")),
                  usd(r.get("usd_estimated")) if r["purpose"] == "all" else "",
                  usd(r.get("usd_actual")) if r["purpose"] == "all" else "")
    Console(width=max(out.width, 120), force_terminal=out.is_terminal, emoji=False).print(t)


def print_calls(name: str, rows: list[dict[str, Any]], total: dict[str, Any]) -> None:
    """The per-run call totals as a table (`pxp calls`, `pxp report --calls`)."""
    t = Table(title=escape(f"LLM calls of {name}"))
    for c in ("rep", "provider:model", "purpose", "calls", "errors", "in", "out", "cache read",
              "cache write", "cost $", "mean ms"):
        t.add_column(c, justify="left" if c in ("provider:model", "purpose") else "right", no_wrap=True)

    def cost(v: float | None) -> str:
        return "—" if v is None else f"{v:.4f}"

    def tokens(r: dict[str, Any], key: str) -> str:  # "—" when no call of the row had usage
        none = r.get("no_usage", 0)
        return "—" if none and none >= r["calls"] - r.get("errors", 0) else str(r[key])

    for r in rows:
        t.add_row(str(r["repetition"]), escape(f"{r['provider']}:{r['model']}"), escape(r["purpose"]),
                  str(r["calls"]), str(r["errors"]), tokens(r, "tokens_in"), tokens(r, "tokens_out"),
                  str(r["cache_read"]), str(r["cache_write"]), cost(r["cost_usd"]),
                  f"{r['latency_ms']:.0f}")
    t.add_row("all", "", "", str(total["calls"]), str(total["errors"]), str(total["tokens_in"]),
              str(total["tokens_out"]), str(total["cache_read"]), str(total["cache_write"]),
              cost(total["cost_usd"]), "")
    # the table is wider than 80 columns: print it whole rather than fold model names
    Console(width=max(out.width, 140), force_terminal=out.is_terminal, emoji=False).print(t)
    if total.get("no_usage"):
        out.print(f"{total['no_usage']} of {total['calls']} call(s) had no usage: the server sent no token counts, "
                  "so their tokens and cost are unknown (—), not zero", highlight=False, markup=False)
    if total.get("unknown"):
        out.print(f"{total['unknown']} call(s) were in flight when a process stopped: outcome unknown, "
                  "counted in calls, tokens and cost not known (list them: pxp calls --unknown)",
                  highlight=False, markup=False)


@task_app.command("check")
def task_check_cmd(
    file: Annotated[Path, typer.Argument(help="Task config (.toml or .json).", parser=named_path)],
) -> None:
    """Validate a custom task config and show the system prompt it gives."""
    from pxp.tasks.custom import TaskConfigError, load_task_config

    try:
        cfg = load_task_config(file)
    except TaskConfigError as e:
        fail(str(e))
    spec = cfg.spec()
    out.print(f"task {spec.name!r}: MATCH {spec.match_kind}, AGREE {spec.agree_kind}, "
              f"{len(spec.labels)} label(s), image {'yes' if spec.image else 'no'}", highlight=False, markup=False)
    out.print(spec.system_prompt(), markup=False, highlight=False)


@task_app.command("attach")
def task_attach_cmd(
    file: Annotated[Path, typer.Argument(help="Task config (.toml or .json).", parser=named_path)],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset to attach it to.")],
) -> None:
    """Store a custom task config with a dataset; runs on it then use the config."""
    from sqlmodel import select

    from pxp.storage.store import db_session, find_dataset
    from pxp.storage.tables import Dataset, Instance
    from pxp.tasks.custom import TaskConfigError, dataset_fit, load_task_config

    try:
        cfg = load_task_config(file)
    except TaskConfigError as e:
        fail(str(e))
    with db_session(state.engine(must_exist=True)) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None:
            fail(f"no dataset named {dataset!r}")
        refs = db.exec(select(Instance.key, Instance.reference_prediction).where(Instance.dataset_id == ds.id)).all()
        if (why := dataset_fit(cfg, ds.name, ds.task, [(str(k), str(p or "")) for k, p in refs])) is not None:
            fail(why)
        row = db.get(Dataset, ds.id)
        assert row is not None
        row.config = {**(row.config or {}), "task_config": cfg.model_dump()}
        db.add(row)
    out.print(f"dataset {dataset!r} now uses task {cfg.name!r}", highlight=False, markup=False)
