"""Storage on SQLite and PostgreSQL: migrations, constraints, JSON and bytes (DESIGN §4)."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import SQLModel, select

import pxp.storage.tables  # noqa: F401
from pxp.storage.schema import made_on
from pxp.storage.store import (
    alembic_config,
    cached_urls,
    find_dataset,
    find_experiment,
    forget_engine,
    get_engine,
    is_empty,
    make_engine,
    upgrade,
)
from pxp.storage.tables import Asset, Dataset, Experiment, Instance, Message, Run, Session


def test_migration_matches_the_models(any_engine: Engine) -> None:
    with any_engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True,
                                                     "include_object": made_on(conn.dialect.name)})
        diff = compare_metadata(ctx, SQLModel.metadata)
    assert diff == []


def test_message_indexes_per_database(any_engine: Engine) -> None:
    """PostgreSQL: one unique (session_id, j) index that carries sender and tag; SQLite (no INCLUDE): that unique
    index, the covering one and tag's (pxp.storage.tables.Message)."""
    insp = inspect(any_engine)
    names = {ix["name"] for ix in insp.get_indexes("message")}
    unique = [u for u in insp.get_unique_constraints("message") if u["name"] == "uq_message_session_j"]
    assert unique and unique[0]["column_names"] == ["session_id", "j"]
    if any_engine.dialect.name == "postgresql":
        assert names <= {"uq_message_session_j"}
        with any_engine.connect() as conn:
            made = conn.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_message_session_j'"))
            assert made.scalar_one().endswith("(session_id, j) INCLUDE (sender, tag)")
    else:
        assert {"ix_message_tag", "ix_message_session_tags"} <= names


def test_migration_0015_message_indexes_down_and_up(any_engine: Engine) -> None:
    """A stored message kept down to 0014 (message's three indexes again on every database) and back up to head
    (PostgreSQL's one unique index with INCLUDE), where a repeated (session, j) is still refused."""
    with DB(any_engine) as db:
        sid = _session(db)
        db.add(Message(session_id=sid, j=1, sender="machine", receiver="human", tag="INIT"))
        db.commit()
    cfg = alembic_config(any_engine)
    with any_engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0014")
    names = {ix["name"] for ix in inspect(any_engine).get_indexes("message")}
    assert {"ix_message_tag", "ix_message_session_tags"} <= names
    upgrade(any_engine)
    test_message_indexes_per_database(any_engine)
    with DB(any_engine) as db:
        assert len(db.exec(select(Message)).all()) == 1
        db.add(Message(session_id=sid, j=1, sender="machine", receiver="human", tag="INIT"))
        with pytest.raises(IntegrityError):
            db.commit()


def test_upgrade_is_idempotent(any_engine: Engine) -> None:
    upgrade(any_engine)
    names = set(inspect(any_engine).get_table_names())
    assert {"message", "session", "context", "llmcall", "evaluation", "asset", "alembic_version"} <= names


def _session(db: DB) -> int:
    ds = Dataset(name="d", task="rad")
    db.add(ds)
    db.flush()
    inst = Instance(dataset_id=ds.id or 0, key="x")
    exp = Experiment(name="e", task="rad", config={"nested": {"a": [1, 2]}})
    db.add_all([inst, exp])
    db.flush()
    run = Run(experiment_id=exp.id or 0, instance_order=[inst.id or 0])
    db.add(run)
    db.flush()
    s = Session(run_id=run.id or 0, instance_id=inst.id or 0)
    db.add(s)
    db.flush()
    return s.id or 0


def test_message_session_j_is_unique(any_engine: Engine) -> None:
    with DB(any_engine) as db:
        sid = _session(db)
        db.add(Message(session_id=sid, j=1, sender="machine", receiver="human", tag="INIT"))
        db.commit()
        db.add(Message(session_id=sid, j=1, sender="machine", receiver="human", tag="INIT"))
        with pytest.raises(IntegrityError):
            db.commit()


def test_json_bytes_and_lookups_round_trip(any_engine: Engine) -> None:
    blob = bytes(range(256)) * 10
    with DB(any_engine) as db:
        _session(db)
        db.add(Asset(sha256="ab" * 32, mime="image/png", data=blob, meta={"window": [40, 400]}))
        db.commit()
    with DB(any_engine) as db:
        asset = db.get(Asset, "ab" * 32)
        assert asset is not None and asset.data == blob and asset.meta == {"window": [40, 400]}
        exp = find_experiment(db, name_or_id="e")
        assert exp is not None and exp.config == {"nested": {"a": [1, 2]}}
        assert find_experiment(db, name_or_id=str(exp.id)) is not None
        assert find_dataset(db, name="d") is not None
        run = db.exec(select(Run)).one()
        assert len(run.instance_order) == 1
    assert not is_empty(any_engine)


def test_sqlite_uses_wal_and_a_busy_timeout(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_foreign_keys_are_enforced(any_engine: Engine) -> None:
    with DB(any_engine) as db:
        db.add(Message(session_id=999, j=1, sender="machine", receiver="human", tag="INIT"))
        with pytest.raises(IntegrityError):
            db.commit()


def test_database_url_from_the_environment(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    e = get_engine()
    assert str(e.url) == url and is_empty(e)
    assert (tmp_path / "env.db").exists()


def test_cached_urls_name_each_cached_engine_once_until_it_is_forgotten(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'c.db'}"
    engine = get_engine(url)
    assert url in cached_urls() and get_engine(url) is engine
    (tmp_path / "c.db").chmod(0o444)  # read-only: cached under its own key, named by the same URL
    try:
        assert get_engine(url) is not engine and url in cached_urls()
        forget_engine(url)
        assert url not in cached_urls() and get_engine(url) is not engine
    finally:
        (tmp_path / "c.db").chmod(0o644)
        forget_engine(url)


def test_postgresql_url_without_a_driver_uses_psycopg(pg_url: str) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    e = make_engine(plain)
    assert e.url.drivername == "postgresql+psycopg"
    upgrade(e)
    assert is_empty(e)
    e.dispose()


def test_migration_0008_probe_down_and_up(any_engine: Engine) -> None:
    """The common-ground probe table (docs/research.md, Common-ground probe) goes down to 0007 and back up to head."""
    assert "probe" in set(inspect(any_engine).get_table_names())
    cfg = alembic_config(any_engine)
    with any_engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0007")
    assert "probe" not in set(inspect(any_engine).get_table_names())
    upgrade(any_engine)
    cols = {c["name"] for c in inspect(any_engine).get_columns("probe")}
    assert {"session_id", "j", "question", "truth", "answer", "valid"} <= cols
