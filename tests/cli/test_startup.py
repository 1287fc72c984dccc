"""Start-up (docs/development.md, "Start-up"): `pxp --help` lists every command from pxp.cli.common.LAZY
without importing it, a command's own help loads only its module, a reading command on a database at
the latest schema imports neither Alembic nor pandas, and `pxp report`, `pxp validate` and `pxp export` read through
SQLAlchemy Core without SQLModel or the ORM. Their times are bench/bench_startup.py's."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from sqlalchemy import Engine, select

from pxp.cli.common import LAZY, app
from pxp.cli.main import LAZY as REGISTERED
from pxp.storage import core_tables
from pxp.storage.core import make_engine
from pxp.storage.schema import head_revision
from tests.factories import make_rad

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "pandas", "numpy", "streamlit", "pxp.storage.tables")


#: run `pxp ARGS` as the console script does, and write the names of the modules it imported at exit
_RUN = ("import atexit, os, runpy, sys; atexit.register(lambda: open(os.environ['PXP_MODULES'], 'w')"
        ".write('\\n'.join(sys.modules))); sys.argv[0] = 'pxp'; runpy.run_module('pxp.cli.main', run_name='__main__')")


def imported(tmp_path: Path, *args: str) -> set[str]:
    """The modules `pxp ARGS` imports, after checking it exits 0."""
    out = tmp_path / "modules.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "PXP_MODULES": str(out)}
    res = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return set(out.read_text().split())


def test_the_listed_help_of_each_command_is_its_own() -> None:
    """LAZY names every command and group of pxp with the module that registers it and its own first line."""
    assert LAZY is REGISTERED and LAZY
    for module in {m for m, _ in LAZY.values()}:
        importlib.import_module(f"pxp.cli.{module}")
    built = typer.main.get_command(app)
    real = built.commands  # type: ignore[attr-defined]
    assert set(real) == set(LAZY)
    for name, (module, line) in LAZY.items():
        cmd = real[name]
        assert " ".join((cmd.help or "").split("\n\n")[0].split()) == line, name
        assert "DESIGN" not in (cmd.help or ""), f"{name}: a user's clone has no DESIGN.md (cite docs/)"
        callback = getattr(cmd, "callback", None)
        if callback is not None and callback.__name__ != "_global":
            assert callback.__module__ == f"pxp.cli.{module}", name


def test_help_imports_no_command_and_no_database_layer(tmp_path: Path) -> None:
    loaded = imported(tmp_path, "--help")
    assert not {m for m in loaded if m.startswith("pxp.cli.") and m not in ("pxp.cli.main", "pxp.cli.common")}
    assert not loaded & set(HEAVY)


@pytest.mark.parametrize("command", ["report", "validate", "export", "run", "import", "doctor", "db", "users"])
def test_a_commands_help_loads_its_module_and_no_database_layer(command: str, tmp_path: Path) -> None:
    loaded = imported(tmp_path, command, "--help")
    assert f"pxp.cli.{LAZY[command][0]}" in loaded
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


#: what a reading command does not load (docs/development.md, "Start-up"): SQLModel, the ORM and the table classes
#: (about 0.25 s of a command), Alembic (only for a database not at the latest schema), pandas and numpy
NOT_READING = ("pxp.storage.tables", "pxp.storage.store", "pxp.storage.scorekeeping")
NOT_READING_PACKAGES = ("sqlmodel", "alembic", "pandas", "numpy")


def _unneeded(loaded: set[str], *allowed: str) -> set[str]:
    """The modules of `loaded` a reading command does not need, but for the packages `allowed`."""
    top = set(NOT_READING_PACKAGES) - set(allowed)
    return {m for m in loaded if m in NOT_READING or m.split(".")[0] in top or m.startswith("sqlalchemy.orm")}


@pytest.fixture
def study(db_url: str, engine: Engine, tmp_path: Path) -> str:
    """A database at the latest schema holding one finished simulated experiment, "exp"."""
    make_rad(engine)
    assert head_revision() is not None
    imported(tmp_path, "--db", db_url, "run", "--dataset", "toy-rad", "--name", "exp", "--no-progress")
    return db_url


def test_report_reads_through_core_without_sqlmodel_nor_the_orm(study: str, tmp_path: Path) -> None:
    """`pxp report` reads pxp.storage.core_tables."""
    for args in (("--experiment", "exp"), ("--experiment", "exp", "--by", "label", "--format", "json")):
        loaded = imported(tmp_path, "--db", study, "report", *args)
        assert {"pxp.analysis.report", "pxp.storage.core_tables"} <= loaded  # the report was made
        assert not _unneeded(loaded), _unneeded(loaded)
        assert "pydantic" not in loaded  # typer's option coercion: pxp.cli.main.plain_options
        assert "rich" not in loaded  # it prints by typer.echo: Rich loads with the first print through common.out


@pytest.mark.parametrize("args", [("validate",), ("validate", "--experiment", "exp")])
def test_validate_reads_through_core_without_sqlmodel_nor_the_orm(study: str, tmp_path: Path,
                                                                  args: tuple[str, ...]) -> None:
    """`pxp validate`, and the pages of pxp.storage.batches it reads, name the tables of pxp.storage.core_tables."""
    loaded = imported(tmp_path, "--db", study, *args)
    assert {"pxp.analysis.validate", "pxp.storage.batches", "pxp.storage.core_tables"} <= loaded
    assert not _unneeded(loaded), _unneeded(loaded)
    assert "pydantic" not in loaded


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_reads_through_core_without_sqlmodel_nor_the_orm(study: str, tmp_path: Path, fmt: str) -> None:
    """`pxp export` too (csv imports pandas to write its chunks, jsonl nothing more)."""
    loaded = imported(tmp_path, "--db", study, "export", "--experiment", "exp", "--format", fmt, "--out",
                      str(tmp_path / "out"))
    assert (tmp_path / "out" / f"messages.{fmt}").stat().st_size > 0  # the export was written
    assert {"pxp.analysis.export", "pxp.storage.batches", "pxp.storage.core_tables"} <= loaded
    unneeded = _unneeded(loaded, *(("pandas", "numpy") if fmt == "csv" else ()))
    assert not unneeded, unneeded


@pytest.mark.parametrize("args", [("calls", "--experiment", "exp"),
                                  ("calls", "--experiment", "exp", "--format", "json"),
                                  ("report", "--experiment", "exp", "--calls")])
def test_calls_reads_through_core_without_sqlmodel_nor_the_orm(study: str, tmp_path: Path,
                                                               args: tuple[str, ...]) -> None:
    """`pxp calls` and `pxp report --calls`: the totals (pxp.analysis.calls) and the experiment through Core, and
    no estimate's module for an experiment without one."""
    loaded = imported(tmp_path, "--db", study, *args)
    assert {"pxp.analysis.calls", "pxp.storage.core_tables"} <= loaded
    assert not _unneeded(loaded), _unneeded(loaded)
    assert not loaded & {"pydantic", "pxp.running.pxp.journal", "pxp.running.pxp.controlled.estimate"}


def test_doctor_on_a_database_at_the_latest_schema_loads_no_orm_nor_alembic(study: str, tmp_path: Path) -> None:
    """`pxp doctor` on an existing database: its schema by one query, the settings and the runs through Core; the
    interrupted runs' module only when a run is marked running, the LLM's only with a local server saved."""
    loaded = imported(tmp_path, "--db", study, "doctor")
    assert {"pxp.storage.schema", "pxp.storage.core_tables"} <= loaded  # the database was read
    assert not _unneeded(loaded), _unneeded(loaded)
    assert not loaded & {"streamlit", "pydantic", "pxp.running.workers.interrupted", "pxp.llm.models"}


def test_doctor_on_a_database_not_made_yet_loads_no_database_layer(tmp_path: Path) -> None:
    """`pxp doctor` before the first start: the SQLite file is read off its URL (pxp.storage.urls), so SQLAlchemy
    is not loaded at all."""
    loaded = imported(tmp_path, "--db", f"sqlite:///{tmp_path}/not-yet.db", "doctor")
    assert "pxp.storage.urls" in loaded  # the URL was read
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert not (tmp_path / "not-yet.db").exists()


@pytest.mark.parametrize("url", ["sqlite:///pxp.db", "sqlite:////tmp/a b/pxp.db", "sqlite+pysqlite:///x/y.db",
                                 "sqlite:///~/pxp.db", "sqlite:///a@b:c/d.db", "sqlite:///a#b.db", "sqlite:///ünï.db",
                                 "sqlite:///a%20b.db", "sqlite:///a.db?mode=ro", "sqlite:///:memory:x",
                                 "sqlite:///file:a.db", "sqlite://host/a.db", "SQLITE:///a.db",
                                 "postgresql+psycopg://u@h/db"])
def test_a_sqlite_file_read_off_its_url_is_the_one_sqlalchemy_reads(url: str) -> None:
    """pxp.storage.urls.sqlite_file, which reads a plain SQLite URL without SQLAlchemy, gives the file SQLAlchemy's
    `make_url` gives, and refuses what it refuses."""
    from sqlalchemy.engine import make_url

    from pxp.storage.faults import StoreError
    from pxp.storage.urls import sqlite_file

    parsed = make_url(url)
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        with pytest.raises(StoreError):
            sqlite_file(url)
        return
    db = parsed.database or ""
    expected = Path(db).expanduser() if parsed.get_backend_name() == "sqlite" and db and db != ":memory:" \
        and not db.startswith("file:") else None
    assert sqlite_file(url) == expected


def test_an_import_into_a_database_at_the_latest_schema_loads_no_orm_alembic_nor_the_confusables_data(
        study: str, tmp_path: Path) -> None:
    """`pxp import csv` into an existing database: whether it is empty is one query (pxp.storage.schema.schema_state),
    an ASCII name's skeleton needs no UTS #39 data (pxp.protocols.text.skeleton), and it writes the dataset and
    its instances through pxp.storage.core_tables, whose defaults are the table classes'
    (tests/storage/test_core_tables.py)."""
    table = tmp_path / "tiny.csv"
    table.write_text("id,text,answer\na1,What is 2+2?,four\na2,Capital of France?,Paris\n", encoding="utf-8")
    loaded = imported(tmp_path, "--db", study, "import", "csv", str(table), "--map", "id=key", "--map", "text=input",
                      "--map", "answer=prediction", "--no-progress")
    assert {"pxp.data.importers.generic", "pxp.storage.core_tables"} <= loaded  # the dataset was written
    assert not _unneeded(loaded), _unneeded(loaded)
    assert not loaded & {"confusable_homoglyphs.confusables"}
    with make_engine(study).connect() as conn:  # stored, with the defaults the table classes give
        ds = conn.execute(select(core_tables.dataset).where(core_tables.dataset.c.name == "tiny")).one()
        keys = conn.execute(select(core_tables.instance.c.key).where(core_tables.instance.c.dataset_id == ds.id)
                            .order_by(core_tables.instance.c.ordinal)).scalars().all()
    assert (ds.task, ds.synthetic, ds.identity, keys) == ("text", False, "tiny", ["a1", "a2"])
    assert ds.created_at is not None


def test_a_run_in_process_loads_no_workers_queue(study: str, tmp_path: Path) -> None:
    """`pxp run` without --distributed loads neither the workers' queue (procrastinate) nor psycopg on SQLite: they
    load only for a distributed run (pxp.cli.held.runner)."""
    loaded = imported(tmp_path, "--db", study, "run", "--dataset", "toy-rad", "--name", "again", "--no-progress")
    assert "pxp.running.pxp.controlled.runner" in loaded  # it ran
    assert not loaded & {"procrastinate", "psycopg", "pxp.running.workers.queue", "pxp.running.workers.queue_wait",
                         "pxp.running.workers.queue_schema"}


def test_a_plain_option_value_is_what_typers_own_coercion_makes() -> None:
    """pxp.cli.main.plain_options takes a str, list[str] or bool value as it is: the same value typer's pydantic
    coercion gives, for every such option of every command; any other value still goes through typer's."""
    import typer.core
    from typer._coercion import build_runtime_param as typers

    from pxp.cli.main import PLAIN

    for module in {m for m, _ in LAZY.values()}:
        importlib.import_module(f"pxp.cli.{module}")
    root = typer.main.get_command(app)
    commands = [root, *root.commands.values()]  # type: ignore[attr-defined]
    commands += [c for g in commands[1:] for c in getattr(g, "commands", {}).values()]
    values = {str: ["x", "", "  spaced ", "ünï/cødé", "--", b"bytes"], bool: [True, False, "true", "0"]}
    checked = 0
    for cmd in commands:
        ctx = typer.Context(cmd)
        for param in cmd.params:
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is None or descriptor.annotation not in PLAIN:
                continue
            ours, theirs = typer.core.build_runtime_param(descriptor), typers(descriptor)
            kind = PLAIN[descriptor.annotation]
            samples = values[kind] if kind is bool or not descriptor.is_list else [("a", "b c"), (), ["x"]]
            for v in samples:
                assert ours.coerce(v, param=param, ctx=ctx) == theirs.coerce(v, param=param, ctx=ctx), (cmd.name, v)
            checked += type(ours).__name__ == "Plain"
    assert checked > 20  # the plain path is the one taken


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> Any:
    """The value a runtime parameter makes of `value`, or the type and words of its refusal."""
    try:
        return runtime.coerce(value, param=param, ctx=ctx)
    except Exception as e:  # compared, not handled
        return type(e), str(e)


def test_a_parsed_option_value_is_what_typers_own_coercion_makes() -> None:
    """pxp.cli.main.plain_options gives an option with a parser (every path: pxp.cli.common.named_path) its parser's
    value without pydantic: the same value, or the same refusal in the same words, as typer's own coercion."""
    import typer.core
    from typer._coercion import build_runtime_param as typers

    for module in {m for m, _ in LAZY.values()}:
        importlib.import_module(f"pxp.cli.{module}")
    root = typer.main.get_command(app)
    commands = [root, *root.commands.values()]  # type: ignore[attr-defined]
    commands += [c for g in commands[1:] for c in getattr(g, "commands", {}).values()]
    samples = ["out", "a/b.csv", "", "   ", "x" * 300, "/" + "d/" * 2100, "ünï/cødé", "--"]
    checked = 0
    for cmd in commands:
        ctx = typer.Context(cmd)
        for param in cmd.params:
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is None or descriptor.parameter_info.parser is None:
                continue
            ours, theirs = typer.core.build_runtime_param(descriptor), typers(descriptor)
            for v in samples:
                assert _outcome(ours, v, param, ctx) == _outcome(theirs, v, param, ctx), (cmd.name, param.name, v)
            checked += type(ours).__name__ == "Parsed"
    assert checked >= 15  # the parser's path is the one taken


def test_doctor_before_a_database_exists_opens_none(tmp_path: Path) -> None:
    """`pxp doctor` on a SQLite file not made yet reads Streamlit's options itself and loads no table class."""
    missing = tmp_path / "not-yet.db"
    loaded = imported(tmp_path, "--db", f"sqlite:///{missing}", "doctor")
    assert not loaded & {"streamlit", "pxp.storage.tables", "pxp.storage.store", "alembic", "pandas"}
    assert not missing.exists()


def test_a_name_found_as_stored_needs_no_confusables_data(study: str, tmp_path: Path) -> None:
    """The UTS #39 data (0.05-0.1 s to load) is read only when a name is not found as given."""
    loaded = imported(tmp_path, "--db", study, "report", "--experiment", "exp")
    assert "confusable_homoglyphs.confusables" not in loaded
    assert "pxp.running.pxp.controlled.attempts" not in loaded  # no aborted session: the reply formats unread


def test_the_head_read_from_the_migration_files_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from pxp.storage.schema import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
