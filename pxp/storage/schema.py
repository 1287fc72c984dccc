"""pxp's schema in a database (DESIGN §4): Alembic migrations, which databases pxp may touch, and the Core copy
of the tables that the reading commands query without the ORM (`pxp.storage.core_tables`, generated here from the
table classes: docs/development.md, "Start-up").

Alembic is imported only when a database is not at the latest schema: a database at head is known by
one query (`at_head`, docs/development.md, "Start-up").

pxp creates its tables only in an empty database (or with `pxp db init`); a database with
other tables, or with a schema revision pxp does not know, is refused with one line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import DateTime, Dialect, Engine, Interval, TypeDecorator, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.operators import OperatorType
from sqlalchemy.types import TypeEngine

from pxp.storage.faults import StoreError as StoreError
from pxp.storage.faults import shown_database

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Table

_MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r"^(down_)?revision\b[^=]*=(.*)$", re.M)


class ForeignDatabase(StoreError):
    """A database that holds tables but not pxp's schema: pxp never touches it."""


def schema_state(engine: Engine) -> tuple[str, str | None]:
    """("empty" | "pxp" | "old" | "foreign" | "unknown" | "unfinished", its Alembic revision) of a database.

    "foreign": tables but no pxp schema (no alembic_version); "unknown": a revision none of
    pxp's migrations know (another application's, or a newer pxp's); "old": pxp's, before head;
    "unfinished": pxp's own first creation stopped part-way (only pxp's tables, all empty, no revision).
    """
    if at_head(engine):  # one query, without Alembic (docs/development.md, "Start-up")
        return "pxp", head_revision()
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


# --- the Core copy of the tables (pxp.storage.core_tables) -------------------------------------------------------

CORE_TABLES = Path(__file__).with_name("core_tables.py")


class UTCDateTime(TypeDecorator[datetime]):
    """SQLModel's UTCDateTime (the type of the table classes' datetimes) without importing SQLModel: aware
    datetimes stored in UTC, read back aware in UTC (tests/storage/test_core_tables.py compares the two)."""

    impl = DateTime
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(timezone=True)

    def coerce_compared_value(self, op: OperatorType | None, value: Any) -> TypeEngine[Any]:
        return Interval() if isinstance(value, timedelta) else self

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError("a datetime stored by pxp must carry its time zone")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.utcoffset() is None else value.astimezone(UTC)


_CORE_HEAD = '''"""The Core copy of pxp's tables, for the commands that read and the table imports (docs/development.md,
"Start-up"): the same names, columns, types, defaults, keys and foreign keys as the table classes of
pxp.storage.tables and pxp.storage.scorekeeping (the one declaration of the schema), without SQLModel or the ORM,
so that a Core insert stores what the ORM's would. No indexes or constraints: pxp never creates tables through it.

Generated by `python -m pxp.storage.schema`; do not edit (tests/storage/test_core_tables.py fails when this file
differs from what the table classes make now).
"""

from sqlalchemy import {imports}

{own}

metadata = MetaData()
'''

#: the callable defaults a Core copy may name, by the function the table classes give: where each is imported from
_DEFAULT_FUNCTIONS = {("builtins", "dict"): None, ("builtins", "list"): None,
                      ("pxp.storage.times", "utcnow"): "pxp.storage.times",
                      ("pxp.storage.identity", "stored_identity"): "pxp.storage.identity"}


def declared_tables() -> list[Table]:
    """The tables the table classes declare (pxp.storage.tables, pxp.storage.scorekeeping), in dependency order."""
    from sqlmodel import SQLModel

    from pxp.storage import scorekeeping, tables

    ours = {vars(cls)["__table__"] for m in (tables, scorekeeping) for cls in vars(m).values()
            if isinstance(cls, type) and issubclass(cls, SQLModel) and cls.__module__ == m.__name__
            and "__table__" in vars(cls)}
    return [t for t in SQLModel.metadata.sorted_tables if t in ours]


def _core_type(column: Any) -> tuple[str, str]:
    """The Core type of a declared column as source text, and the sqlalchemy name it needs ("" for none)."""
    from sqlmodel.sql.sqltypes import AutoString
    from sqlmodel.sql.sqltypes import UTCDateTime as Declared

    t = column.type
    if isinstance(t, Declared):
        return "UTCDateTime()", ""
    if isinstance(t, AutoString):
        return f"String({t.length})", "String"
    name = type(t).__name__
    if type(t).__module__ != "sqlalchemy.sql.sqltypes" or repr(t) != f"{name}()":
        raise TypeError(f"{column.table.name}.{column.name}: {t!r} has no Core copy in pxp.storage.schema._core_type")
    return f"{name}()", name


def default_function(column: Any) -> Callable[..., Any] | None:
    """The function a column's callable default calls (SQLAlchemy wraps one that takes no context), or None."""
    default = column.default
    if default is None or not default.is_callable:
        return None
    fn: Callable[..., Any] = getattr(default.arg, "__wrapped__", default.arg)
    return fn


def _core_default(column: Any, own: dict[str, set[str]]) -> str | None:
    """A declared column's default as source text (`default=...`), noting what it imports in `own`; None for none."""
    default = column.default
    if default is None:
        return None
    fn = default_function(column)
    if fn is None:
        if not default.is_scalar or not isinstance(default.arg, str | bool | int | float):
            raise TypeError(f"{column.table.name}.{column.name}: default {default!r} has no Core copy")
        return f"default={json.dumps(default.arg) if isinstance(default.arg, str) else repr(default.arg)}"
    where = (fn.__module__, fn.__name__)
    if where not in _DEFAULT_FUNCTIONS:
        raise TypeError(f"{column.table.name}.{column.name}: default {fn!r} has no Core copy in "
                        "pxp.storage.schema._DEFAULT_FUNCTIONS")
    if (module := _DEFAULT_FUNCTIONS[where]) is not None:
        own.setdefault(module, set()).add(fn.__name__)
    return f"default={fn.__name__}"


def core_tables_source() -> str:
    """The text of pxp/storage/core_tables.py as the table classes declare it now."""
    names = {"Column", "MetaData", "Table"}
    own: dict[str, set[str]] = {"pxp.storage.schema": {"UTCDateTime"}}
    body: list[str] = []
    for table in declared_tables():
        body += ["", f"{table.name} = Table(", f'    "{table.name}", metadata,']
        for c in table.columns:
            typ, need = _core_type(c)
            names.add(need)
            args = [f'"{c.name}"', typ]
            for fk in sorted(c.foreign_keys, key=lambda f: f.target_fullname):
                names.add("ForeignKey")
                args.append(f'ForeignKey("{fk.target_fullname}")')
            if c.primary_key:
                args.append("primary_key=True")
            if c.nullable == c.primary_key:  # Column's default: a key is not nullable, another column is
                args.append(f"nullable={c.nullable}")
            if (default := _core_default(c, own)) is not None:
                args.append(default)
            body.append(f"    Column({', '.join(args)}),")
        body.append(")")
    order = sorted(names - {""}, key=lambda n: (not n.isupper(), n))  # as ruff sorts them: constants first
    mine = "\n".join(f"from {m} import {', '.join(sorted(n, key=lambda n: (not n.isupper(), n)))}"
                      for m, n in sorted(own.items()))
    head = _CORE_HEAD.format(imports=", ".join(order), own=mine)
    return head + "\n".join(body) + "\n"


if __name__ == "__main__":  # python -m pxp.storage.schema: write pxp/storage/core_tables.py again
    CORE_TABLES.write_text(core_tables_source(), encoding="utf-8")
    print(f"wrote {CORE_TABLES}", file=sys.stderr)
