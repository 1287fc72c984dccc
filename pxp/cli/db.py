"""`pxp db init`: create or upgrade pxp's tables, the one explicit way into a database that holds
other tables (README, "Databases"). Every other command creates pxp's tables only in an empty
database, and the reading commands (`pxp validate`, `pxp report`, ...) never change a schema.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from pxp.cli.common import app, fail, out, state

db_app = typer.Typer(help="The database: create or upgrade pxp's tables.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("init")
def db_init_cmd() -> None:
    """Create pxp's tables (or upgrade them to this pxp's schema) in the --db database, beside any
    other tables it holds."""
    from pxp.protocols.errors import PxpError
    from pxp.storage.schema import check_schema
    from pxp.storage.store import forget_engine, make_engine, sqlite_file

    try:
        path = sqlite_file(state.db)
    except PxpError as e:
        fail(str(e))
    if path is not None and not path.exists():  # a new file: made beside, renamed into place once made
        state.engine(atomic=True)
        state.keep()
        shown = str(path)
    else:  # one transaction: Alembic's upgrade (pxp.storage.schema.upgrade)
        engine = make_engine(state.db)
        try:
            check_schema(engine, migrate=True, init=True)
        finally:
            engine.dispose()
        forget_engine(state.db)
        shown = engine.url.render_as_string(hide_password=True)
    out.print(escape(f"pxp's tables are ready in {shown}"), highlight=False, soft_wrap=True)
