"""Engine creation, migrations, and the plain queries pxp needs (DESIGN §3–4).

SQLite (a file, WAL, busy timeout) by default; PostgreSQL through PXP_DATABASE_URL
or `--db`. Queries are plain functions with keyword-only arguments.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, event, func
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlalchemy.pool import NullPool
from sqlmodel import Session as DB
from sqlmodel import SQLModel, col, create_engine, select

from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.protocols.text import skeleton
from pxp.storage.schema import ForeignDatabase as ForeignDatabase  # schema checks live in pxp.storage.schema
from pxp.storage.schema import StoreError as StoreError
from pxp.storage.schema import alembic_config as alembic_config
from pxp.storage.schema import check_head, check_schema
from pxp.storage.schema import schema_state as schema_state
from pxp.storage.schema import upgrade as upgrade
from pxp.storage.tables import (
    Dataset,
    Experiment,
    Instance,
    Message,
    Run,
    Session,
)
from pxp.storage.urls import database_url as database_url  # the URL rules live in pxp.storage.urls
from pxp.storage.urls import sqlite_file as sqlite_file
from pxp.storage.urls import supported_url as supported_url

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


def forget_engine(url: str | None = None) -> None:
    """Dispose of the cached engines of `url` (before its file is removed)."""
    key = database_url(url)
    with _lock:
        for k in (key, f"{key}#ro"):
            _migrated.discard(k)
            engine = _engines.pop(k, None)
            if engine is not None:
                engine.dispose()


def holds_data(engine: Engine) -> bool:
    """True when the database holds a dataset or an experiment."""
    with DB(engine) as db:
        return count_rows(db, Dataset) + count_rows(db, Experiment) > 0


@contextmanager
def db_session(engine: Engine) -> Iterator[DB]:
    """A unit of work: commits on success, rolls back on error."""
    with DB(engine, expire_on_commit=False) as s:
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


# --- queries -------------------------------------------------------------------------


def session_msgs(db: DB, *, session_id: int) -> list[Msg]:
    """The session's messages as protocol Msgs, in order of j."""
    rows = (
        db.connection()
        .execute(
            sa_select(
                col(Message.j),
                col(Message.sender),
                col(Message.tag),
                col(Message.prediction),
                col(Message.explanation),
                col(Message.match),
                col(Message.agree),
                col(Message.changed),
            )
            .where(col(Message.session_id) == session_id)
            .order_by(col(Message.j))
        )
        .all()
    )
    return [Msg(r[0], Sender(r[1]), Tag(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows]


def same_name(db: DB, model: type[Dataset] | type[Experiment], name: str) -> str | None:
    """The stored name that is the same identity as `name` (its own first, else an equal skeleton:
    docs/development.md "The text rule"); None if there is none."""
    if db.exec(select(model.name).where(model.name == name)).first() is not None:
        return name  # the common case, answered without the confusables data (loading it costs a command 0.1 s)
    return db.exec(select(model.name).where(model.identity == skeleton(name)).order_by(model.name)).first()


def experiment_name_taken(db: DB, name: str) -> str | None:
    """Why `name` cannot name a new experiment (one line: it exists, or one looks the same), or None."""
    other = same_name(db, Experiment, name)
    if other is None:
        return None
    return (f"an experiment named {name!r} already exists" if other == name
            else f"the experiment's name {name!r} looks the same as the experiment {other!r}: choose another name")


def find_experiment(db: DB, *, name_or_id: str) -> Experiment | None:
    """An experiment by name (or one that looks the same), or by numeric id."""
    name = same_name(db, Experiment, name_or_id)
    exp = db.exec(select(Experiment).where(Experiment.name == name)).first() if name is not None else None
    if exp is None and name_or_id.isdigit():
        exp = db.get(Experiment, int(name_or_id))
    return exp


def find_dataset(db: DB, *, name: str) -> Dataset | None:
    """A dataset by name, or one that looks the same."""
    found = same_name(db, Dataset, name)
    return db.exec(select(Dataset).where(Dataset.name == found)).first() if found is not None else None


def dataset_instances(db: DB, *, dataset_id: int, split: str | None = None) -> list[Instance]:
    q = select(Instance).where(Instance.dataset_id == dataset_id)
    if split is not None:
        q = q.where(Instance.split == split)
    return list(db.exec(q.order_by(col(Instance.ordinal), col(Instance.id))).all())


def experiment_runs(db: DB, *, experiment_id: int) -> list[Run]:
    return list(db.exec(select(Run).where(Run.experiment_id == experiment_id).order_by(col(Run.repetition))).all())


def run_sessions(db: DB, *, run_id: int) -> list[Session]:
    return list(db.exec(select(Session).where(Session.run_id == run_id).order_by(col(Session.ordinal))).all())


def experiment_session_tags(
    db: DB, *, experiment_id: int
) -> tuple[list[Run], dict[int, list[Session]], dict[int, list[tuple[Sender, Tag]]]]:
    """Runs, their sessions, and each session's (sender, tag) list, in two queries."""
    runs = experiment_runs(db, experiment_id=experiment_id)
    run_ids = [r.id for r in runs]
    sessions: dict[int, list[Session]] = {rid: [] for rid in run_ids if rid is not None}
    if not run_ids:
        return runs, sessions, {}
    for s in db.exec(select(Session).join(Run, col(Run.id) == col(Session.run_id))
                     .where(Run.experiment_id == experiment_id).order_by(col(Session.ordinal))):
        sessions[s.run_id].append(s)
    tags: dict[int, list[tuple[Sender, Tag]]] = {}
    rows = db.exec(
        select(Message.session_id, Message.sender, Message.tag)
        .join(Session, col(Session.id) == col(Message.session_id))
        .join(Run, col(Run.id) == col(Session.run_id))
        .where(Run.experiment_id == experiment_id)
        .order_by(col(Message.session_id), col(Message.j))
    ).all()
    for sid, sender, tag in rows:
        tags.setdefault(sid, []).append((Sender(sender), Tag(tag)))
    return runs, sessions, tags


def count_rows(db: DB, model: type[Any]) -> int:
    return int(db.exec(select(func.count()).select_from(model)).one())


def is_empty(engine: Engine) -> bool:
    """True when the database holds no dataset yet (first start)."""
    with DB(engine) as db:
        return count_rows(db, Dataset) == 0


def ids(rows: Sequence[Any]) -> list[int]:
    return [r.id for r in rows]


def table_of(model: type[SQLModel]) -> Table:
    """The Core `Table` of a SQLModel table class, for Core statements (sqlmodel's stubs do not
    declare `__table__`)."""
    table = sa_inspect(model).local_table
    assert isinstance(table, Table), f"{model.__name__} is not a table model"
    return table
