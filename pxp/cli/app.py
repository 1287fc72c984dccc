"""`pxp app`: start the Streamlit app that ships inside the package (like `label-studio start`).

The app's main script is pxp/app/streamlit_app.py; pxp's Streamlit settings (the same as
the checkout's .streamlit/config.toml) are passed as flags, so they apply from any
working directory. Further options go to `streamlit run` unchanged (they win).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pxp.cli.common import app, err, state
from pxp.team.config import ConfigError, check_serving

MAIN = Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py"

#: pxp's Streamlit settings: no usage statistics leave the machine, no developer toolbar
#: for clinicians, no exception trace on screen, light theme with a success-green primary
#: colour (Streamlit's default red reads as an error on a selected "Yes" or a finished run); no full
#: garbage collection after every script run (about 0.2 s on pxp's heap, paid on every Send; Python's
#: own collector still runs).
STREAMLIT_SETTINGS = {
    "browser.gatherUsageStats": "false",
    "client.toolbarMode": "minimal",
    "client.showErrorDetails": "none",
    "theme.base": "light",
    "theme.primaryColor": "#2e7d32",
    "runner.postScriptGC": "false",
}


def secrets_files(extra: list[str]) -> list[str]:
    """The secrets files Streamlit will read: its `secrets.files` option (config files and a
    `--secrets.files` flag among the extra options included)."""
    from streamlit import config

    config.get_config_options()
    files = [str(f) for f in config.get_option("secrets.files")]
    given = [a.split("=", 1)[1] for a in extra if a.startswith("--secrets.files=")]
    given += [extra[i + 1] for i, a in enumerate(extra[:-1]) if a == "--secrets.files"]
    return given or files


def streamlit_command(port: int | None, extra: list[str]) -> list[str]:
    """The `streamlit run` command line for the packaged app."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(MAIN)]
    for key, value in STREAMLIT_SETTINGS.items():
        cmd += [f"--{key}", value]
    if port is not None:
        cmd += ["--server.port", str(port)]
    return cmd + extra


@app.command("app", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def app_cmd(
    ctx: typer.Context,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535, help="Port to serve on (default 8501).")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Database URL for the app.")] = None,
) -> None:
    """Start the pxp web app (extra options, e.g. --server.address 0.0.0.0, go to streamlit run)."""
    env = dict(os.environ)
    url = db or state.db
    try:  # a broken configuration never serves (docs/operations.md, Troubleshooting)
        check_serving(secrets_files(list(ctx.args)), url, env)
    except ConfigError as problem:
        err.print(f"error: {problem}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if url:
        env["PXP_DATABASE_URL"] = url
    cmd = streamlit_command(port, list(ctx.args))
    if os.name == "posix":  # become the server: signals (Ctrl+C, SIGTERM) reach Streamlit itself
        sys.stdout.flush()
        os.execve(sys.executable, cmd, env)
    raise typer.Exit(subprocess.call(cmd, env=env))


# --- pxp doctor ----------------------------------------------------------------------------------

#: a SQLite database with less free disk than this beside it is reported (a run stores as it goes)
MIN_FREE_BYTES = 200 * 1024 * 1024


def doctor_checks(files: list[str], explicit: str | None, environ: dict[str, str]) -> list[tuple[bool, str]]:
    """(ok, line) for each check of `pxp doctor` (docs/operations.md, Troubleshooting)."""
    import shutil
    import urllib.request
    from importlib.metadata import version

    from pxp.storage.faults import describe
    from pxp.storage.schema import schema_state
    from pxp.storage.store import make_engine, sqlite_file
    from pxp.team.config import Secrets, check_database, read_secrets, serving_url, shown_url

    out: list[tuple[bool, str]] = []
    try:
        secrets = read_secrets(files)
        shown = ", ".join(str(f) for f in secrets.files) or "none (no secrets file)"
        out.append((True, f"configuration: {shown}"))
    except ConfigError as problem:
        secrets = Secrets((), {})
        out.append((False, f"configuration: {problem}"))
    url = serving_url(explicit, environ, secrets)
    try:
        check_database(url)
        path = sqlite_file(url)
        if path is not None and not path.exists():
            out.append((True, f"database: {path} does not exist yet; pxp makes it on first start (`pxp demo`)"))
        else:
            engine = make_engine(url)
            try:
                state, revision = schema_state(engine)
            finally:
                engine.dispose()
            ok = state in ("pxp", "empty")
            what = {"pxp": f"pxp schema {revision} (the latest)",
                    "empty": "empty; pxp makes its tables on first start",
                    "old": f"an older pxp schema ({revision}): run `pxp db init` to upgrade it",
                    "unfinished": "a first start that did not finish: run `pxp demo` or `pxp db init`",
                    }.get(state, state)
            out.append((ok, f"database: {shown_url(url)}: {what}"))
        if path is not None:
            free = shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free
            out.append((free >= MIN_FREE_BYTES, f"disk: {free / 2**30:.1f} GiB free beside {path}" +
                        ("" if free >= MIN_FREE_BYTES else "; free some space before a run")))
        else:
            out.append((True, "workers: " + _workers_line(url)))
    except ConfigError as problem:
        out.append((False, f"database: {problem}"))
    except Exception as exc:
        out.append((False, f"database: {shown_url(url)}: {describe(exc)}"))
    out += _model_checks(url)
    auth = secrets.values.get("auth")
    if not auth:
        out.append((True, "login: off (no [auth]): every page is open to whoever reaches the server; "
                          "fine for a demo, configure [auth] for a team"))
    else:
        metas = [str(t.get("server_metadata_url")) for t in [auth, *auth.values()]
                 if isinstance(t, dict) and t.get("server_metadata_url")]
        for meta in metas:
            try:
                with urllib.request.urlopen(meta, timeout=5) as r:
                    ok = r.status == 200 and b"authorization_endpoint" in r.read(1_000_000)
                out.append((ok, f"login: {meta} " + ("answers" if ok else "is not an OpenID provider's metadata")))
            except (OSError, ValueError) as exc:
                out.append((False, f"login: the provider's metadata {meta} cannot be reached "
                                   f"({type(exc).__name__}); check server_metadata_url and the network"))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        where = "environment" if environ.get(name) else "Streamlit secrets" if secrets.values.get(name) else None
        out.append((True, f"{name}: " + (f"set (in the {where})" if where else
                                         "not set (only the simulated machine and local servers)")))
    out.append((True, f"versions: pxp {version('pxp')}, Streamlit {version('streamlit')}"))
    return out


def _model_checks(url: str) -> list[tuple[bool, str]]:
    """With a local server saved in Settings (a base URL): is the machine's model among those it lists?"""
    from sqlalchemy import select

    from pxp.llm.base import LLMConfigError, LLMError, is_llm_spec
    from pxp.llm.models import served_models
    from pxp.storage.store import make_engine
    from pxp.storage.tables import AppSetting

    try:
        engine = make_engine(url, must_exist=True)
        with engine.connect() as conn:
            rows: dict[str, Any] = {str(k): v for k, v in conn.execute(
                select(AppSetting.__table__.c.key, AppSetting.__table__.c.value)).all()}  # type: ignore[attr-defined]
        engine.dispose()
    except Exception:  # no database yet, or not pxp's: said by the database line
        return []
    base, spec = rows.get("base_url") or "", rows.get("generator") or ""
    if not base or not is_llm_spec(str(spec)):
        return []
    try:
        served = served_models(str(spec), str(base))
    except (LLMConfigError, LLMError) as err:
        return [(False, f"model: {err}")]
    model = str(spec).split(":", 1)[1]
    if model in served:
        return [(True, f"model: {spec} is served by {base}")]
    return [(False, f"model: {spec} is not among the models {base} serves ({', '.join(served[:8]) or 'none'}); "
                    "pick one in Settings (`pxp models --base-url URL` lists them)")]


def _workers_line(url: str) -> str:
    """PostgreSQL's `pxp worker`s seen in the last STALLED_SECONDS."""
    from pxp.running.workers.queue_schema import STALLED_SECONDS, live_workers
    from pxp.storage.store import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            n = live_workers(conn)
    finally:
        engine.dispose()
    return f"{n} `pxp worker` seen in the last {STALLED_SECONDS:g} s" if n else \
        "no `pxp worker` seen lately (needed only for `pxp run --distributed`)"


@app.command("doctor")
def doctor_cmd(
    db: Annotated[str | None, typer.Option("--db", help="Database URL to check.")] = None,
) -> None:
    """Check what the app and the runs need, one line each (✓ or ✗ with what to do); exit 1 on any ✗."""
    checks = doctor_checks(secrets_files([]), db or state.db, dict(os.environ))
    for ok, line in checks:
        typer.echo(f"{'✓' if ok else '✗'} {line}")
    if not all(ok for ok, _ in checks):
        raise typer.Exit(1)
