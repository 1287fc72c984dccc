"""`pxp app`: start the Streamlit app that ships inside the package (like `label-studio start`).

The app's main script is pxp/app/streamlit_app.py; pxp's Streamlit settings (the same as
the checkout's .streamlit/config.toml) are passed as flags, so they apply from any
working directory. Further options go to `streamlit run` unchanged (they win).

`pxp app` stays the parent of the server it starts (docs/operations.md, Install): SIGTERM, SIGINT or
SIGHUP to it, or its own parent going away, ends the server and every process below it (run workers,
drawing workers) within a few seconds; it is their subreaper on Linux, so none is left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pxp.cli.common import app, err, require_settings, state
from pxp.protocols.settings import USES
from pxp.team.config import ConfigError, check_serving

MAIN = Path(__file__).resolve().parents[1] / "app" / "server.py"

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
    "theme.textColor": "#0e0e0e",
    "runner.postScriptGC": "false",
}


def _flag(extra: list[str], name: str) -> list[str]:
    """The values of `--name` among the extra options (`--name=V` or `--name V`)."""
    given = [a.split("=", 1)[1] for a in extra if a.startswith(f"--{name}=")]
    return given + [extra[i + 1] for i, a in enumerate(extra[:-1]) if a == f"--{name}"]


def _configured(name: str) -> Any:
    """A Streamlit option as `streamlit run` will see it apart from flags, or None where it keeps its default:
    its environment variable (STREAMLIT_SECTION_OPTION, which `streamlit run` takes as the flag), else the
    last config file that sets it (~/.streamlit/config.toml, then ./.streamlit/config.toml). Read without
    importing Streamlit, which costs a command most of a second; tests/cli/test_streamlit_config.py checks it
    against Streamlit's own reading."""
    import re
    import tomllib

    section, option = name.split(".", 1)
    snake = re.sub(r"([a-z])([A-Z])", r"\1_\2", option)
    var = f"STREAMLIT_{section}_{snake}".upper()
    if var in os.environ:
        return os.environ[var].split()
    found = None
    for path in (Path.home() / ".streamlit" / "config.toml", Path.cwd() / ".streamlit" / "config.toml"):
        try:
            parsed = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # Streamlit too reads no option from a file it cannot read or parse
        value = parsed.get(section, {}).get(option) if isinstance(parsed.get(section), dict) else None
        found = value if value is not None else found
    return found


def secrets_files(extra: list[str]) -> tuple[list[str], bool]:
    """The secrets files Streamlit will read (its `secrets.files` option, config files and a
    `--secrets.files` flag among the extra options included), and whether they were named explicitly
    (then each must exist: pxp.team.config.read_secrets)."""
    given = _flag(extra, "secrets.files")
    if given:
        return given, True
    configured = _configured("secrets.files")
    if configured is not None:
        return ([configured] if isinstance(configured, str) else [str(f) for f in configured]), True
    return [str(Path.home() / ".streamlit" / "secrets.toml"), str(Path.cwd() / ".streamlit" / "secrets.toml")], False


def address_given(extra: list[str]) -> bool:
    """Whether the address to listen on was given (`--server.address`, a config file, STREAMLIT_SERVER_ADDRESS)."""
    return bool(_flag(extra, "server.address")) or _configured("server.address") is not None


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
    require_settings(*USES)  # the app uses every setting
    env = dict(os.environ)
    url = db or state.db
    extra = list(ctx.args)
    files, named = secrets_files(extra)
    try:  # a broken configuration never serves (docs/operations.md, Troubleshooting)
        secrets = check_serving(files, url, env, named=named)
    except ConfigError as problem:
        err.print(f"error: {problem}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if url:
        env["PXP_DATABASE_URL"] = url
    if not secrets.login_on and not address_given(extra):  # an open app is this machine's only, unless asked
        extra += ["--server.address", "127.0.0.1"]
        err.print("login is off: serving on 127.0.0.1 only (this machine); give --server.address 0.0.0.0 to "
                  "serve others, who will all be admin", highlight=False, markup=False, soft_wrap=True)
    cmd = streamlit_command(port, extra)
    sys.stdout.flush()
    if os.name != "posix":
        raise typer.Exit(subprocess.call(cmd, env=env))
    from pxp.running.workers.supervise import supervise

    raise typer.Exit(supervise(cmd, env))


# --- pxp doctor ----------------------------------------------------------------------------------

#: a SQLite database with less free disk than this beside it is reported (a run stores as it goes)
MIN_FREE_BYTES = 200 * 1024 * 1024


def doctor_checks(files: list[str], explicit: str | None, environ: dict[str, str], *,
                  named: bool = False) -> list[tuple[bool, str]]:
    """(ok, line) for each check of `pxp doctor` (docs/operations.md, Troubleshooting)."""
    import shutil
    from importlib.metadata import version

    from pxp.protocols.errors import PxpError
    from pxp.protocols.settings import problems
    from pxp.storage.faults import describe
    from pxp.storage.urls import sqlite_file
    from pxp.team.config import Secrets, check_database, read_secrets, serving_url, shown_url

    out: list[tuple[bool, str]] = []
    try:
        secrets = read_secrets(files, named=named)
        shown = ", ".join(str(f) for f in secrets.files) or "none (no secrets file)"
        out.append((True, f"configuration: {shown}"))
    except ConfigError as problem:
        secrets = Secrets((), {})
        out.append((False, f"configuration: {problem}"))
    out += [(False, f"setting: {line}") for line in problems(environ)] or [
        (True, "settings: every PXP_* variable set is allowed (docs/operations.md, Settings)")]
    try:
        url = serving_url(explicit, environ, secrets)
    except PxpError as problem:  # a bad PXP_DATABASE_URL: its line is above
        out.append((False, f"database: {problem}"))
        return out
    try:
        check_database(url)
        path = sqlite_file(url)
        pxp_schema = False
        if path is not None and not path.exists():
            out.append((True, f"database: {path} does not exist yet; pxp makes it on first start (`pxp demo`)"))
        else:
            from pxp.storage.core import make_engine  # SQLAlchemy Core: no ORM (docs/development.md, "Start-up")
            from pxp.storage.schema import schema_state  # SQLAlchemy only for a database there is

            engine = make_engine(url)
            try:
                state, revision = schema_state(engine)
            finally:
                engine.dispose()
            ok, pxp_schema = state in ("pxp", "empty"), state == "pxp"
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
        if pxp_schema:
            out += _interrupted_lines(url)
    except ConfigError as problem:
        out.append((False, f"database: {problem}"))
    except Exception as exc:
        out.append((False, f"database: {shown_url(url)}: {describe(exc)}"))
    out += _model_checks(url)
    auth = secrets.values.get("auth")
    if not auth:
        out.append(_open_login_line(url, secrets))
    else:
        metas = [str(t.get("server_metadata_url")) for t in [auth, *auth.values()]
                 if isinstance(t, dict) and t.get("server_metadata_url")]
        out += [_metadata_line(meta) for meta in metas]
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        where = "environment" if environ.get(name) else "Streamlit secrets" if secrets.values.get(name) else None
        out.append((True, f"{name}: " + (f"set (in the {where})" if where else
                                         "not set (only the simulated machine and local servers)")))
    out.append((True, f"versions: pxp {version('pxp')}, Streamlit {version('streamlit')}"))
    return out


def _metadata_line(meta: str) -> tuple[bool, str]:
    """Whether an [auth] provider's server_metadata_url answers its metadata (pxp.team.config.read_metadata)."""
    import urllib.error
    import urllib.request

    from pxp.llm.errors import ReplyError
    from pxp.team.config import read_metadata

    try:
        try:
            with urllib.request.urlopen(meta, timeout=5) as r:
                status, ctype, body = r.status, r.headers.get("content-type", ""), r.read(1_000_000)
        except urllib.error.HTTPError as answered:  # an error status is an answer: read like any other
            status, ctype, body = answered.code, answered.headers.get("content-type", ""), answered.read(1_000_000)
        read_metadata(meta, status, ctype, body)
    except ReplyError as bad:
        return False, f"login: {bad}; check server_metadata_url"
    except (OSError, ValueError) as exc:
        return False, (f"login: the provider's metadata {meta} cannot be reached ({type(exc).__name__}); check "
                       "server_metadata_url and the network")
    return True, f"login: {meta} answers"


def _open_login_line(url: str, secrets: Any) -> tuple[bool, str]:
    """The login line when no [auth] is read: ✗ for a database with a team (the app refuses to serve it)."""
    from pxp.team.config import ConfigError, check_login_follows_team, team_size

    try:
        check_login_follows_team(url, team_size(url), secrets)
    except ConfigError as problem:
        return False, f"login: {problem}"
    except Exception:  # the database line says why it cannot be read
        return False, "login: off, and whether the database has a team cannot be read; the app will not serve it"
    return True, ("login: off (no [auth], no team): every page is open to whoever reaches the server, which "
                  "`pxp app` therefore serves on 127.0.0.1 only; configure [auth] for a team")


def _model_checks(url: str) -> list[tuple[bool, str]]:
    """With a local server saved in Settings (a base URL): is the machine's model among those it lists?"""
    from pxp.storage.urls import sqlite_file

    path = sqlite_file(url)
    if path is not None and not path.exists():
        return []  # no database yet: said by the database line
    from sqlalchemy import select

    from pxp.storage.core import make_engine
    from pxp.storage.core_tables import appsetting

    try:
        engine = make_engine(url, must_exist=True)
        with engine.connect() as conn:
            rows: dict[str, Any] = {str(k): v for k, v in conn.execute(
                select(appsetting.c.key, appsetting.c.value)).all()}
        engine.dispose()
    except Exception:  # no database yet, or not pxp's: said by the database line
        return []
    base, spec = rows.get("base_url") or "", rows.get("generator") or ""
    if not base:
        return []
    from pxp.llm.base import LLMConfigError, LLMError, is_llm_spec  # only with a local server saved

    if not is_llm_spec(str(spec)):
        return []
    from pxp.llm.models import served_models

    try:
        served = served_models(str(spec), str(base))
    except (LLMConfigError, LLMError) as err:
        return [(False, f"model: {err}")]
    model = str(spec).split(":", 1)[1]
    if model in served:
        return [(True, f"model: {spec} is served by {base}")]
    return [(False, f"model: {spec} is not among the models {base} serves ({', '.join(served[:8]) or 'none'}); "
                    "pick one in Settings (`pxp models --base-url URL` lists them)")]


def _interrupted_lines(url: str) -> list[tuple[bool, str]]:
    """A ✗ for every run whose process ended without finishing or pausing, with the command that resumes it."""
    from pxp.storage.core import any_running, make_engine

    engine = make_engine(url)
    try:
        if not any_running(engine):  # none to name: the workers' modules (and the ORM) are not loaded
            return []
        from pxp.running.workers.interrupted import interrupted_runs

        found = interrupted_runs(engine)
    finally:
        engine.dispose()
    return [(False, f"run: {i.line()}; resume it with `{i.resume}`") for i in found]


def _workers_line(url: str) -> str:
    """PostgreSQL's `pxp worker`s seen in the last STALLED_SECONDS."""
    from pxp.running.workers.queue_schema import STALLED_SECONDS, live_workers
    from pxp.storage.core import make_engine

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
    files, named = secrets_files([])
    checks = doctor_checks(files, db or state.db, dict(os.environ), named=named)
    for ok, line in checks:
        typer.echo(f"{'✓' if ok else '✗'} {line}")
    if not all(ok for ok, _ in checks):
        raise typer.Exit(1)
