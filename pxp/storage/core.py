"""Engines and the lookups of the commands that only read, in SQLAlchemy Core without SQLModel or the ORM
(docs/development.md, "Start-up"; DESIGN §3–4): SQLite (a file, WAL, busy timeout) by default, PostgreSQL through
PXP_DATABASE_URL or `--db`, and the tables of pxp.storage.core_tables. pxp.storage.store re-exports the engines.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, Table, and_, create_engine, event, select
from sqlalchemy.pool import NullPool

from pxp.storage import core_tables
from pxp.storage.schema import StoreError, check_head, check_schema
from pxp.storage.urls import database_url, sqlite_file, supported_url

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


class DatabaseMissing(StoreError):
    """A database that a reading command was pointed at does not exist."""


def _writable(path: Path) -> bool:
    """Whether `path` can be written: os.access, and for root (whom os.access lets
    through) also a write bit in the mode, so a chmod 444 archive is treated as read-only."""
    if not os.access(path, os.W_OK):
        return False
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return bool(path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return True


def read_only_mode(path: Path) -> str | None:
    """How a SQLite file must be opened: None (read-write), "ro" (file read-only, folder
    writable: SQLite can still make its WAL index), "immutable" (folder read-only too)."""
    if not path.exists() or _writable(path):
        return None
    return "ro" if _writable(path.parent) else "immutable"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_ro_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA query_only=ON")
    cur.close()


def make_engine(url: str | None = None, *, must_exist: bool = False) -> Engine:
    """A new engine for `url`: SQLite files get WAL and a 30 s busy timeout.

    `must_exist` (commands that only read, the app's existing-database setting): a SQLite
    file that does not exist is refused with DatabaseMissing, naming the path, and nothing
    is created. A SQLite file that cannot be written is opened read-only (mode=ro, or
    immutable when its folder is read-only too).
    """
    url = database_url(url)
    parsed = supported_url(url)
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database or ""
        path = sqlite_file(url)
        if path is not None and not path.exists():
            if must_exist:
                raise DatabaseMissing(f"no database at {path} (check the path; nothing was created)")
            path.parent.mkdir(parents=True, exist_ok=True)
        mode = read_only_mode(path) if path is not None else None
        if path is not None and mode is not None:
            flags = "mode=ro&immutable=1" if mode == "immutable" else "mode=ro"
            engine = create_engine(
                f"sqlite:///file:{path.resolve()}?{flags}&uri=true",
                connect_args={"check_same_thread": False, "timeout": 30},
            )
            event.listen(engine, "connect", _sqlite_ro_pragmas)
            return engine
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            poolclass=NullPool if db in ("", ":memory:") else None,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def is_read_only(engine: Engine) -> bool:
    """Whether the engine opened a SQLite file read-only (make_engine)."""
    return engine.url.get_backend_name() == "sqlite" and engine.url.query.get("mode") == "ro"


def get_engine(url: str | None = None, *, migrate: bool = True, must_exist: bool = False) -> Engine:
    """A cached engine per URL, checked (check_schema) and migrated to the latest schema on first use.

    `must_exist`: see make_engine. A read-only database is not migrated; one whose
    schema is older than this pxp's is refused with one line. `migrate` False (the reading
    commands) never changes the schema.
    """
    key = database_url(url)
    path = sqlite_file(key)
    if must_exist and path is not None and not path.exists():
        raise DatabaseMissing(f"no database at {path} (check the path; nothing was created)")
    key_ro = f"{key}#ro" if path is not None and read_only_mode(path) else key
    with _lock:
        engine = _engines.get(key_ro)
        if engine is None:
            engine = make_engine(key, must_exist=must_exist)
            try:
                if is_read_only(engine):
                    check_head(engine, path)
                else:
                    check_schema(engine, migrate=migrate)
            except BaseException:
                engine.dispose()
                raise
            _engines[key_ro] = engine
            if migrate or is_read_only(engine):
                _migrated.add(key_ro)
        elif migrate and key_ro not in _migrated:
            check_schema(engine, migrate=True)
            _migrated.add(key_ro)
    return engine


_migrated: set[str] = set()


def cached_urls() -> set[str]:
    """The database URLs whose engines get_engine has cached (forget_engine disposes of each)."""
    with _lock:
        return {key.removesuffix("#ro") for key in _engines}


def forget_engine(url: str | None = None) -> None:
    """Dispose of the cached engines of `url` (before its file is removed)."""
    key = database_url(url)
    with _lock:
        for k in (key, f"{key}#ro"):
            _migrated.discard(k)
            engine = _engines.pop(k, None)
            if engine is not None:
                engine.dispose()


# --- lookups by name ------------------------------------------------------------------------------------------


def holds_data(engine: Engine) -> bool:
    """True when the database holds a dataset or an experiment."""
    with engine.connect() as conn:
        return any(conn.execute(select(t.c.id).limit(1)).first() is not None
                   for t in (core_tables.dataset, core_tables.experiment))


def same_name_in(conn: Connection, table: Table, name: str) -> str | None:
    """The stored name of `table` (dataset or experiment) that is the same identity as `name` (its own first, else
    an equal skeleton: docs/development.md "The text rule"); None if there is none."""
    if conn.execute(select(table.c.name).where(table.c.name == name)).first() is not None:
        return name  # the common case, answered without the confusables data (loading it costs a command 0.1 s)
    from pxp.protocols.text import skeleton

    found = conn.execute(select(table.c.name).where(table.c.identity == skeleton(name)).order_by(table.c.name))
    return found.scalar()


@dataclass(frozen=True)
class ExperimentRow:
    """What a report reads of an experiment (its row in pxp.storage.core_tables.experiment)."""

    id: int
    name: str
    n: int
    config: dict[str, Any]


def experiment_id_in(conn: Connection, name_or_id: str) -> int | None:
    """The id of an experiment by name (or one that looks the same), else by numeric id; None if there is none."""
    e = core_tables.experiment
    name = same_name_in(conn, e, name_or_id)
    found = conn.execute(select(e.c.id).where(e.c.name == name)).scalar() if name is not None else None
    if found is None and name_or_id.isdigit():
        found = conn.execute(select(e.c.id).where(e.c.id == int(name_or_id))).scalar()
    return None if found is None else int(found)


def experiment_row(engine: Engine, *, name_or_id: str) -> ExperimentRow | None:
    """An experiment by name or id (experiment_id_in): pxp.storage.store.find_experiment in Core."""
    e = core_tables.experiment
    with engine.connect() as conn:
        found = experiment_id_in(conn, name_or_id)
        row = None if found is None else conn.execute(
            select(e.c.id, e.c.name, e.c.n, e.c.config).where(e.c.id == found)).first()
    return None if row is None else ExperimentRow(int(row.id), str(row.name), int(row.n), dict(row.config or {}))


def marked_running(experiment: Table) -> ColumnElement[bool]:
    """A controlled experiment marked running: one that may have been interrupted (pxp.running.workers.interrupted
    decides), on the Core table or the table class's own."""
    return and_(experiment.c.mode == "controlled", experiment.c.status == "running")


def any_running(engine: Engine) -> bool:
    """Whether an experiment is marked running (`pxp doctor` asks pxp.running.workers.interrupted only then)."""
    e = core_tables.experiment
    with engine.connect() as conn:
        return conn.execute(select(e.c.id).where(marked_running(e)).limit(1)).first() is not None
