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
from typing import Annotated

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
