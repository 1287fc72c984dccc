"""The `pxp` command line (typer): one module per command group, registered here (DESIGN §8).

`--db URL` before or after any command; errors are one clear line (pxp.errors.user_message).
"""

from __future__ import annotations

import sys

from rich.markup import escape

from pxp.cli import analysis, data, db, export, llm, runs, scorekeeping, users  # noqa: F401  (each registers its commands)
from pxp.cli import app as app_command  # noqa: F401  (`pxp app`)
from pxp.cli import worker as worker_command  # noqa: F401  (`pxp worker`)
from pxp.cli.common import app, err
from pxp.errors import user_message
from pxp.protocols.settings import SettingError
from pxp.protocols.settings import value as setting
from pxp.storage.faults import is_database_error


def quiet_drivers() -> None:
    """No driver's own warnings on stderr: psycopg and SQLAlchemy log a lost connection's object reprs
    (with Python's last-resort handler), and a connection collected after a fault reports through
    the unraisable hook; the fault reaches the user as one line of pxp's instead."""
    import logging

    for name in ("psycopg", "psycopg.pool", "sqlalchemy"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    # a provider's in-flight limit halved after a 429 is for `pxp worker` and the server's log; a command's
    # user reads its outcome lines (a pause names the 429 already)
    logging.getLogger("pxp.llm.limits").setLevel(logging.ERROR)
    default = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_value is not None and is_database_error(unraisable.exc_value):
            return
        default(unraisable)

    sys.unraisablehook = hook


def _debug() -> bool:
    """PXP_DEBUG (a bad value is refused at the command's start: pxp.cli.common.require_settings)."""
    try:
        return bool(setting("PXP_DEBUG"))
    except SettingError:
        return False


def main() -> None:
    """Entry point: run the app; any unexpected error becomes one line (PXP_DEBUG=1 for a trace)."""
    debug = _debug()
    if not debug:
        quiet_drivers()
    try:
        app()
    except SystemExit:
        raise
    except Exception as e:
        if debug:
            raise
        err.print(f"[red]error:[/red] {escape(user_message(e))}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
