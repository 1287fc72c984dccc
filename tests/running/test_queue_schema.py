"""procrastinate's schema in the pxp database: installed once, upgraded by its migrations (docs/operations.md, Workers).

Real PostgreSQL: an old procrastinate schema is built from procrastinate's own migration files,
upgraded by ensure_schema, compared with a fresh install of schema.sql in another database, and
a repetition job is run through it.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from procrastinate.schema import SchemaManager
from sqlalchemy import Engine, create_engine, text

from pxp.running.pxp.experiments import create_experiment
from pxp.running.workers.queue import enqueue, jobs
from pxp.running.workers.queue_schema import (
    MIGRATIONS_TABLE,
    QueueError,
    ensure_schema,
    migration_sql,
    record,
    recorded_migrations,
    shipped_migrations,
)
from pxp.running.workers.queue_worker import serve
from pxp.storage.store import make_engine
from tests.running.test_queue import ENV, PXP, ROOT, _cfg, pg  # noqa: F401

#: what the schema is made of, as the catalog says (function bodies, not their schema-qualified headers)
CATALOG = {
    "functions": "SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' || md5(p.prosrc) "
                 "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                 "WHERE n.nspname = 'public' AND p.proname LIKE 'procrastinate%'",
    "columns": "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '') "
               "|| ' ' || is_nullable FROM information_schema.columns "
               "WHERE table_schema = 'public' AND table_name LIKE 'procrastinate%'",
    "indexes": "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'procrastinate%'",
    "constraints": "SELECT c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid) FROM pg_constraint k "
                   "JOIN pg_class c ON c.oid = k.conrelid WHERE c.relname LIKE 'procrastinate%'",
    "enums": "SELECT t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_type t "
             "JOIN pg_enum e ON e.enumtypid = t.oid WHERE t.typname LIKE 'procrastinate%' GROUP BY t.typname",
    "triggers": "SELECT t.tgname || ' ' || c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND c.relname LIKE 'procrastinate%'",
}


def _catalog(engine: Engine) -> dict[str, set[str]]:
    with engine.connect() as conn:
        return {k: {str(r[0]) for r in conn.execute(text(q))} for k, q in CATALOG.items()}


@pytest.fixture
def fresh(pg_url: str) -> Iterator[Engine]:
    """Another database of the same server with schema.sql of the installed procrastinate, nothing else."""
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    name = f"pxp_t_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    e = make_engine(admin.url.set(database=name).render_as_string(hide_password=False))
    try:
        with e.begin() as conn:
            conn.connection.driver_connection.execute(SchemaManager.get_schema())  # type: ignore[union-attr]
        yield e
    finally:
        e.dispose()
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _old_schema(engine: Engine, before: str) -> list[str]:
    """procrastinate as an older release left it: its migration files up to `before` (excluded),
    each in its own transaction, in order, and recorded as pxp records them."""
    old = [m for m in shipped_migrations() if m < before]
    for name in old:
        with engine.begin() as conn:
            conn.connection.driver_connection.execute(migration_sql(name))  # type: ignore[union-attr]
            record(conn, [name])
    return old


def _recorded(engine: Engine) -> set[str] | None:
    with engine.connect() as conn:
        return recorded_migrations(conn)


@pytest.mark.postgres
def test_an_old_schema_is_upgraded_to_the_installed_one_and_runs_a_job(pg: tuple[str, Engine], fresh: Engine) -> None:  # noqa: F811
    _, engine = pg
    old = _old_schema(engine, "03.00.00")  # procrastinate 2.x
    assert old[0] == "00.00.00_01_initial.sql" and old[-1].startswith("02.")
    assert _recorded(engine) == set(old)
    before = _catalog(engine)
    assert before != _catalog(fresh)  # the old schema differs (e.g. no procrastinate_workers)
    assert not any(c.startswith("procrastinate_workers.") for c in before["columns"])

    assert ensure_schema(engine) is False  # upgraded, not installed
    assert _recorded(engine) == set(shipped_migrations())
    assert _catalog(engine) == _catalog(fresh)
    assert ensure_schema(engine) is False and _catalog(engine) == _catalog(fresh)  # nothing applied twice

    exp = create_experiment(engine, _cfg(1), name="U")  # a repetition goes through the upgraded queue
    enqueue(engine, exp.id or 0)
    serve(engine, burst=True)
    assert {st for _, st in jobs(engine, exp.id or 0).values()} == {"succeeded"}
    with engine.connect() as conn:
        assert conn.execute(text("select status from experiment where name = 'U'")).scalar() == "finished"


@pytest.mark.postgres
def test_a_fresh_install_records_every_shipped_file_and_an_unrecorded_schema_is_taken_as_installed(
    pg: tuple[str, Engine], fresh: Engine,  # noqa: F811
) -> None:
    _, engine = pg
    assert _recorded(engine) is None
    assert ensure_schema(engine) is True
    assert _recorded(engine) == set(shipped_migrations())
    assert _catalog(engine) == _catalog(fresh)
    # a schema.sql installed by a pxp that kept no record: the installed package's schema, nothing applied
    assert _recorded(fresh) is None
    assert ensure_schema(fresh) is False
    assert _recorded(fresh) == set(shipped_migrations())
    assert _catalog(fresh) == _catalog(engine)


@pytest.mark.postgres
def test_pending_migrations_with_a_live_worker_are_refused_in_one_line(pg: tuple[str, Engine]) -> None:  # noqa: F811
    url, engine = pg
    old = _old_schema(engine, "03.02.00")  # procrastinate 3.1: workers have heartbeats
    with engine.begin() as conn:  # an old worker, alive
        conn.execute(text("INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now())"))
    with pytest.raises(QueueError, match="stop the old workers first"):
        ensure_schema(engine)
    assert _recorded(engine) == set(old)  # nothing applied
    res = subprocess.run([*PXP, "--db", url, "worker", "--burst"], env=ENV, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 1, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        f"error: procrastinate's tables need {len(shipped_migrations()) - len(old)} migration(s) for the installed "
        "procrastinate, but a pxp worker is running with the old ones; stop the old workers first, then start again"]
    with engine.begin() as conn:  # the old worker stopped long ago
        conn.execute(text("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'"))
    assert ensure_schema(engine) is False
    assert _recorded(engine) == set(shipped_migrations())
    with engine.connect() as conn:
        assert conn.execute(text(f"select count(*) from {MIGRATIONS_TABLE}")).scalar() == len(shipped_migrations())


@pytest.mark.postgres
def test_a_migration_that_fails_is_one_line_and_applies_nothing_of_itself(pg: tuple[str, Engine]) -> None:  # noqa: F811
    _, engine = pg
    old = _old_schema(engine, "03.00.00")
    with engine.begin() as conn:  # a record that lags behind the schema: 02.00.03 adds a column that is there
        conn.execute(text(f"DELETE FROM {MIGRATIONS_TABLE} WHERE name >= '02.00.03'"))
    with pytest.raises(QueueError) as e:
        ensure_schema(engine)
    assert str(e.value).startswith("procrastinate's migration 02.00.03_01_add_job_priority.sql failed (")
    assert "\n" not in str(e.value)
    assert _recorded(engine) == {m for m in old if m < "02.00.03"}


def test_the_installed_procrastinate_ships_ordered_migrations() -> None:
    files = shipped_migrations()
    assert files[0] == "00.00.00_01_initial.sql" and files == sorted(files)
    pre, post = files.index("03.00.00_01_pre_cancel_notification.sql"), files.index(
        "03.00.00_50_post_cancel_notification.sql")
    assert pre < post  # a version's pre part applies before its post part


@pytest.mark.postgres
def test_a_machine_with_an_older_procrastinate_than_the_record_is_refused_in_one_line(pg: tuple[str, Engine]) -> None:  # noqa: F811
    """The record names files this procrastinate does not ship (another machine upgraded the tables):
    no worker and no --distributed run starts here, and nothing is created or applied."""
    from importlib.metadata import version

    url, engine = pg
    assert ensure_schema(engine) is True
    future = ["99.00.00_01_pre_future.sql", "99.00.00_50_post_future.sql"]
    with engine.begin() as conn:  # what a newer procrastinate's pxp records after its upgrade
        record(conn, future)
    said = (f"error: the database's procrastinate tables are newer than this machine's procrastinate "
            f"{version('procrastinate')}: {MIGRATIONS_TABLE} records migration file(s) it does not ship "
            f"({', '.join(future)}); upgrade pxp/procrastinate on this machine")
    with pytest.raises(QueueError) as e:
        ensure_schema(engine)
    assert f"error: {e.value}" == said
    for args in (["worker", "--burst"],
                 ["run", "--dataset", "toy-rad", "--reps", "1", "--name", "N", "--distributed", "--no-progress"]):
        res = subprocess.run([*PXP, "--db", url, *args], env=ENV, cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 1, res.stdout + res.stderr
        assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [said], res.stderr
    assert _recorded(engine) == set(shipped_migrations()) | set(future)
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from experiment")).scalar() == 0  # refused before creating one
