"""procrastinate's tables in the pxp database: installed once, upgraded with procrastinate (docs/operations.md,
Workers).

procrastinate ships its schema as one file (schema.sql, the current version) and as ordered
migrations (procrastinate/sql/migrations/*.sql: `xx.yy.zz_ab_*.sql`, the `_01_` pre parts
before the `_50_` post parts); it keeps no record of which ones a database has ("it's your
responsibility to keep track", its migration how-to). pxp keeps that record in its own table,
MIGRATIONS_TABLE (one row per migration file):

- a fresh database gets schema.sql and a row for every migration file the installed package ships;
- a database with procrastinate's tables but no record (installed by an earlier pxp, which
  installed the then-installed package's schema.sql) is recorded as the installed package's;
- otherwise the files the record lacks are applied in file order, each in its own transaction
  with its row (enum values a file adds can be used by the next one), under a session-level
  advisory lock so two workers starting at once upgrade once.

A machine whose procrastinate is older than the database's record (the record names files this
package does not ship) is refused in one line naming the installed version and those files: its
code may not fit the newer tables; upgrade pxp/procrastinate there.
Old workers may run code that needs the old schema: with a worker whose heartbeat is younger
than STALLED_SECONDS and migrations pending, ensure_schema refuses in one line (stop the old
workers first). Schemas older than procrastinate 3.1 have no heartbeat table and are not checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, text

from pxp.running.pxp.config import RunError

STALLED_SECONDS = 30.0
MIGRATIONS_TABLE = "pxp_procrastinate_migrations"
_SCHEMA_LOCK = 0x70787071  # advisory lock key: one schema install or upgrade at a time


class QueueError(RunError):
    """The distributed runner cannot work here, in one line."""


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def conninfo(engine: Engine) -> str:
    """The libpq URL of the pxp database (procrastinate speaks psycopg without SQLAlchemy)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def shipped_migrations() -> list[str]:
    """The installed procrastinate's migration files, in the order they apply (their names sort so)."""
    folder = resources.files("procrastinate").joinpath("sql", "migrations")
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".sql"))


def migration_sql(name: str) -> str:
    return resources.files("procrastinate").joinpath("sql", "migrations", name).read_text(encoding="utf-8")


def _run_sql(conn: Connection, sql: str) -> None:
    """Several statements, no parameters: psycopg's simple protocol (SQLAlchemy would split nothing)."""
    driver: Any = conn.connection.driver_connection
    driver.execute(sql)


def _installed(conn: Connection) -> bool:
    return conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None


def recorded_migrations(conn: Connection) -> set[str] | None:
    """The migration files the record says the database has; None without a record table."""
    if conn.execute(text(f"SELECT to_regclass('{MIGRATIONS_TABLE}')")).scalar() is None:
        return None
    return {str(n) for (n,) in conn.execute(text(f"SELECT name FROM {MIGRATIONS_TABLE}"))}


def record(conn: Connection, names: Iterable[str]) -> None:
    """Note that the database has these migration files (the caller commits)."""
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                      "name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"))
    for name in names:
        conn.execute(text(f"INSERT INTO {MIGRATIONS_TABLE} (name) VALUES (:n) ON CONFLICT DO NOTHING"), {"n": name})


def check_not_newer(done: set[str], shipped: list[str]) -> None:
    """Refuse a database upgraded by a newer procrastinate than this machine's (QueueError, one line)."""
    unknown = sorted(done - set(shipped))
    if not unknown:
        return
    from importlib.metadata import version

    files = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
    raise QueueError(f"the database's procrastinate tables are newer than this machine's procrastinate "
                     f"{version('procrastinate')}: {MIGRATIONS_TABLE} records migration file(s) it does not ship "
                     f"({files}); upgrade pxp/procrastinate on this machine")


def live_workers(conn: Connection, alive_within: float = STALLED_SECONDS) -> int:
    """procrastinate workers with a heartbeat younger than `alive_within` s (0 before procrastinate 3.1)."""
    if conn.execute(text("SELECT to_regclass('procrastinate_workers')")).scalar() is None:
        return 0
    return int(conn.execute(text(
        "SELECT count(*) FROM procrastinate_workers WHERE last_heartbeat > now() - make_interval(secs => :s)"),
        {"s": alive_within}).scalar_one())


def ensure_schema(engine: Engine) -> bool:
    """Install or upgrade procrastinate's tables in the pxp database; True if freshly installed.

    Idempotent and safe when several workers start at once (an advisory lock). Raises QueueError
    on SQLite, when migrations are pending while a worker is alive, and when the record has files
    the installed procrastinate does not ship (it is older than the database's).
    """
    if not is_postgres(engine):
        raise QueueError("workers need a PostgreSQL database (they share it); "
                         "on SQLite run without --distributed (`pxp run` runs the repetitions in-process)")
    shipped = shipped_migrations()
    with engine.connect() as conn:
        done = recorded_migrations(conn) if _installed(conn) else None
    if done is not None:
        check_not_newer(done, shipped)
    if done is not None and set(shipped) <= done:
        return False
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _SCHEMA_LOCK})
        conn.commit()
        try:
            return _install_or_upgrade(conn, shipped)
        finally:
            conn.rollback()
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _SCHEMA_LOCK})
            conn.commit()


def _install_or_upgrade(conn: Connection, shipped: list[str]) -> bool:
    """Under the lock: install schema.sql, record an unrecorded schema, or apply the missing files."""
    from procrastinate.schema import SchemaManager

    record(conn, [])
    conn.commit()
    if not _installed(conn):
        _run_sql(conn, SchemaManager.get_schema())
        record(conn, shipped)
        conn.commit()
        return True
    done = recorded_migrations(conn) or set()
    check_not_newer(done, shipped)  # another machine may have upgraded meanwhile
    if not done:  # installed by a pxp that kept no record: the installed package's schema.sql
        record(conn, shipped)
        conn.commit()
        return False
    pending = [m for m in shipped if m not in done]
    if pending and live_workers(conn):
        raise QueueError(f"procrastinate's tables need {len(pending)} migration(s) for the installed procrastinate, "
                         "but a pxp worker is running with the old ones; stop the old workers first, then start again")
    for name in pending:  # each file with its record, one transaction each
        try:
            _run_sql(conn, migration_sql(name))
        except psycopg.Error as e:
            conn.rollback()
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise QueueError(f"procrastinate's migration {name} failed ({why}); the files before it are applied "
                             f"and recorded in {MIGRATIONS_TABLE}, nothing of it was") from None
        record(conn, [name])
        conn.commit()
    return False
