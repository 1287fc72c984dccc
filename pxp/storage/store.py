"""Engine creation, migrations, and the plain queries pxp needs (DESIGN §3–4).

SQLite (a file, WAL, busy timeout) by default; PostgreSQL through PXP_DATABASE_URL
or `--db`. Queries are plain functions with keyword-only arguments.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, Table, func
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlmodel import Session as DB
from sqlmodel import SQLModel, col, select

from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.storage import core_tables
from pxp.storage.core import DatabaseMissing as DatabaseMissing  # engines live in pxp.storage.core (no ORM)
from pxp.storage.core import cached_urls as cached_urls
from pxp.storage.core import experiment_id_in, same_name_in
from pxp.storage.core import forget_engine as forget_engine
from pxp.storage.core import get_engine as get_engine
from pxp.storage.core import is_read_only as is_read_only
from pxp.storage.core import make_engine as make_engine
from pxp.storage.core import read_only_mode as read_only_mode
from pxp.storage.schema import ForeignDatabase as ForeignDatabase  # schema checks live in pxp.storage.schema
from pxp.storage.schema import StoreError as StoreError
from pxp.storage.schema import alembic_config as alembic_config
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
    """The stored name that is the same identity as `name` (pxp.storage.core.same_name_in); None if there is none."""
    table = core_tables.dataset if model is Dataset else core_tables.experiment
    return same_name_in(db.connection(), table, name)


def experiment_name_taken(db: DB, name: str) -> str | None:
    """Why `name` cannot name a new experiment (one line: it exists, or one looks the same), or None."""
    other = same_name(db, Experiment, name)
    if other is None:
        return None
    return (f"an experiment named {name!r} already exists" if other == name
            else f"the experiment's name {name!r} looks the same as the experiment {other!r}: choose another name")


def find_experiment(db: DB, *, name_or_id: str) -> Experiment | None:
    """An experiment by name (or one that looks the same), or by numeric id (pxp.storage.core.experiment_id_in)."""
    found = experiment_id_in(db.connection(), name_or_id)
    return None if found is None else db.get(Experiment, found)


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
