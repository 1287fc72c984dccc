"""The Core copy of the tables (pxp.storage.core_tables; docs/development.md, "Start-up"): generated from the table
classes, the one declaration of the schema, so it cannot drift from them; rows read through it equal the ORM's,
on SQLite and PostgreSQL; and the Core lookups find what pxp.storage.store finds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session as DB
from sqlmodel import select as orm_select

from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage import core_tables
from pxp.storage.core import experiment_row
from pxp.storage.schema import CORE_TABLES, UTCDateTime, core_tables_source, declared_tables, default_function
from pxp.storage.store import db_session, find_experiment
from pxp.storage.tables import ALL_TABLES, Evaluation, Experiment, Message, Run, Session
from tests.factories import make_rad


def test_the_generated_file_is_what_the_table_classes_make_now() -> None:
    assert CORE_TABLES.read_text(encoding="utf-8") == core_tables_source(), (
        "the table classes changed: run `python -m pxp.storage.schema` to write pxp/storage/core_tables.py again")


def test_each_core_table_has_the_declared_columns_types_and_keys() -> None:
    declared = {t.name: t for t in declared_tables()}
    assert {m.__tablename__ for m in ALL_TABLES} <= set(declared)  # type: ignore[attr-defined]
    assert set(core_tables.metadata.tables) == set(declared)
    for name, table in declared.items():
        core = core_tables.metadata.tables[name]
        assert [c.name for c in core.columns] == [c.name for c in table.columns], name
        for c in table.columns:
            k = core.c[c.name]
            assert (k.primary_key, k.nullable) == (c.primary_key, c.nullable), f"{name}.{c.name}"
            assert {f.target_fullname for f in k.foreign_keys} == {f.target_fullname for f in c.foreign_keys}
            for dialect in (sqlite.dialect(), postgresql.dialect()):  # the same column type in each database
                assert k.type.compile(dialect=dialect) == c.type.compile(dialect=dialect), f"{name}.{c.name}"
            # the same default: the same value, or the same function called (a Core insert stores what the ORM's does)
            assert (k.default is None) == (c.default is None), f"{name}.{c.name}"
            if c.default is not None:
                assert (default_function(k), k.default.arg if k.default.is_scalar else None) == (
                    default_function(c), c.default.arg if c.default.is_scalar else None), f"{name}.{c.name}"


def test_a_datetime_reads_back_as_sqlmodels_type_reads_it() -> None:
    from sqlmodel.sql.sqltypes import UTCDateTime as Declared

    ours, theirs = UTCDateTime(), Declared()
    for dialect in (sqlite.dialect(), postgresql.dialect()):
        for value in (None, datetime(2026, 11, 27, 21, 30, 5, 123456), datetime(2026, 1, 1, tzinfo=UTC),
                      datetime.fromisoformat("2026-11-27T23:30:00+02:00")):
            assert ours.process_result_value(value, dialect) == theirs.process_result_value(value, dialect)
            got = ours.process_result_value(value, dialect)
            assert got is None or got.tzinfo == UTC
    with pytest.raises(ValueError, match="time zone"):
        ours.process_bind_param(datetime(2026, 11, 27), sqlite.dialect())


def _studied(engine: Engine) -> int:
    make_rad(engine)
    cfg = RunConfig(dataset="toy-rad", reps=2, seed=3, simulated={"accuracy": 0.5, "adopt": 0.6})
    exp = create_experiment(engine, cfg, name="core-rad")
    run_experiment(engine, exp.id or 0)
    return exp.id or 0


def test_rows_read_through_core_equal_the_orms(any_engine: Engine) -> None:
    _studied(any_engine)
    for model in (Experiment, Run, Session, Message, Evaluation):
        table = core_tables.metadata.tables[model.__tablename__]  # type: ignore[attr-defined]
        with DB(any_engine) as db:
            orm = [m.model_dump() for m in db.exec(orm_select(model).order_by(model.id))]  # type: ignore[attr-defined]
        with any_engine.connect() as conn:
            core = [dict(r) for r in conn.execute(select(table).order_by(table.c.id)).mappings()]
        assert orm and core == orm, model.__name__
        assert all(r["created_at"].tzinfo == UTC for r in core if "created_at" in r)


def test_the_core_lookup_finds_what_the_store_finds(engine: Engine) -> None:
    exp_id = _studied(engine)
    for asked in ("core-rad", str(exp_id), "соre-rad", "missing", "999"):  # "соre" with a Cyrillic "о"
        with db_session(engine) as db:
            exp = find_experiment(db, name_or_id=asked)
        row = experiment_row(engine, name_or_id=asked)
        if exp is None:
            assert row is None, asked
        else:
            assert row is not None and (row.id, row.name, row.n, row.config) == (exp.id, exp.name, exp.n, exp.config)
    assert experiment_row(engine, name_or_id="соre-rad") is not None  # a look-alike name is the same experiment
