"""pxp's schema in a database (DESIGN §4): Alembic migrations, and which databases pxp may touch.

Alembic is imported only when a database is not at the latest schema: a database at head is known by
one query (`at_head`, docs/development.md, "Start-up").

pxp creates its tables only in an empty database (or with `pxp db init`); a database with
other tables, or with a schema revision pxp does not know, is refused with one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from pxp.protocols.errors import PxpError
from pxp.storage.faults import shown_database

if TYPE_CHECKING:
    from alembic.config import Config

_MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r"^(down_)?revision\b[^=]*=(.*)$", re.M)


class StoreError(PxpError, RuntimeError):
    """A database problem worth one clear line to the user."""



class ForeignDatabase(StoreError):
    """A database that holds tables but not pxp's schema: pxp never touches it."""


def schema_state(engine: Engine) -> tuple[str, str | None]:
    """("empty" | "pxp" | "old" | "foreign" | "unknown" | "unfinished", its Alembic revision) of a database.

    "foreign": tables but no pxp schema (no alembic_version); "unknown": a revision none of
    pxp's migrations know (another application's, or a newer pxp's); "old": pxp's, before head;
    "unfinished": pxp's own first creation stopped part-way (only pxp's tables, all empty, no revision).
    """
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy import inspect

    tables = set(inspect(engine).get_table_names())
    if not tables:
        return "empty", None
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision() if "alembic_version" in tables else None
    if current is None:
        if tables == {"alembic_version"}:
            return "empty", None
        return ("unfinished" if _unfinished(engine, tables) else "foreign"), None
    script = ScriptDirectory.from_config(alembic_config())
    try:
        known = script.get_revision(current) is not None
    except Exception:  # alembic's own errors for a revision it cannot resolve
        known = False
    if not known:
        return "unknown", current
    return ("pxp" if current == script.get_current_head() else "old"), current


def _unfinished(engine: Engine, tables: set[str]) -> bool:
    """pxp's own database whose first creation stopped part-way (a full disk): only tables of pxp's
    schema, every one empty, and no schema revision recorded."""
    from sqlalchemy import func, select, table
    from sqlmodel import SQLModel

    import pxp.storage.scorekeeping
    import pxp.storage.tables  # noqa: F401  (their tables are SQLModel's metadata)

    ours = set(SQLModel.metadata.tables) | {"alembic_version"}
    if not tables <= ours:
        return False
    with engine.connect() as conn:
        return all(conn.execute(select(func.count()).select_from(table(name))).scalar() == 0 for name in tables)


def remove_tables(engine: Engine) -> None:
    """Remove every table: an unfinished first creation (all empty), so it can be made again, or what a failed
    command made in a database that had no table when it began (pxp.cli.common.CliState.finish)."""
    from sqlalchemy import MetaData

    meta = MetaData()
    meta.reflect(bind=engine)
    with engine.begin() as conn:
        meta.drop_all(conn)


def _shown(engine: Engine) -> str:
    """The database as an error names it (pxp.storage.faults.shown_database)."""
    return shown_database(engine)


def head_revision() -> str | None:
    """The latest of pxp's migrations, read from their files' `revision` and `down_revision` lines (no
    Alembic import); None unless exactly one revision is no other's parent."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        for down, value in _REVISION.findall(path.read_text(encoding="utf-8")):
            (parents if down else revisions).update(re.findall(r"['\"]([^'\"]+)['\"]", value))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def at_head(engine: Engine) -> bool:
    """True when the database's one recorded revision is pxp's latest (one query; False on any doubt)."""
    head = head_revision()
    try:
        with engine.connect() as conn:
            current = list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    except SQLAlchemyError:  # no such table: empty, foreign or unfinished, decided by schema_state
        return False
    return head is not None and current == [head]


def check_schema(engine: Engine, *, migrate: bool, init: bool = False) -> None:
    """Refuse, with one line and nothing changed, a database pxp must not touch; migrate when allowed.

    pxp creates its tables only in an empty database, or in one with other tables when `init`
    (`pxp db init`) says so; a reading command (`migrate` False) never changes the schema.
    """
    if at_head(engine):
        return
    state, current = schema_state(engine)
    where = _shown(engine)
    if state == "unknown":
        raise StoreError(f"{where}: its schema revision {current!r} is not one of this pxp's (another "
                         "application's database, or one from a newer pxp); nothing was changed")
    if state == "foreign" and not init:
        raise ForeignDatabase(f"{where} has tables but no pxp schema; pxp does not touch another "
                              "application's database: use an empty one, or `pxp db init` to add pxp's tables")
    if state == "pxp":
        return
    if state == "unfinished" and migrate:  # pxp's own, left part-made by a failed first start: made again
        remove_tables(engine)
    if not migrate:
        if state == "old":
            raise StoreError(f"{where} has an older pxp schema ({current}); a reading command changes nothing: "
                             "run `pxp db init` to upgrade it")
        raise StoreError(f"{where} has no pxp tables yet; a reading command changes nothing: import data, "
                         "run `pxp demo` or `pxp db init` first")
    upgrade(engine)


def check_head(engine: Engine, path: Path | None) -> None:
    """A read-only database must already be at the latest schema (it cannot be migrated)."""
    if at_head(engine):
        return
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise StoreError(f"{path} is read-only and its schema ({current or 'none'}) is not this pxp's "
                         f"({head}); copy it to writable storage to upgrade it")


def made_on(dialect: str) -> Callable[..., bool]:
    """Alembic's `include_object` for a database of `dialect`: an index or constraint the models make only on
    another database (`ddl_if`, as message's SQLite-only indexes in pxp.storage.tables) is not compared there."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        only = getattr(obj, "_ddl_if", None)
        wanted = getattr(only, "dialect", None)
        return wanted is None or dialect in ((wanted,) if isinstance(wanted, str) else wanted)

    return include


def alembic_config(engine: Engine | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    if engine is not None:
        cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration up to head (idempotent)."""
    from alembic import command

    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
