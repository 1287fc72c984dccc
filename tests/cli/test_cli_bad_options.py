"""Bad options and databases on the command line: one line, a non-zero exit, nothing stored
(README, "Errors"; DESIGN §4 for the databases)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from pxp.storage.tables import Dataset, Experiment, Message
from tests.factories import make_rad

runner = CliRunner()


def pxp(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def counts(url: str) -> tuple[int, int, int]:
    with DB(get_engine(url)) as db:
        return tuple(int(db.exec(select(func.count()).select_from(t)).one())  # type: ignore[return-value]
                     for t in (Dataset, Experiment, Message))


def one_line(res: Any) -> str:
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output and "╭" not in res.output
    return lines[0]


@pytest.fixture
def url(db_url: str) -> str:
    make_rad(get_engine(db_url), per_label=2)
    return db_url


@pytest.mark.parametrize(("args", "why"), [
    (["run", "--dataset", "toy-rad", "--n", "abc"], "Invalid value for '--n'"),
    (["run", "--dataset", "toy-rad", "--reps", "1e3"], "Invalid value for '--reps'"),
    (["run", "--dataset", "toy-rad", "--eval-every", "0"], "Invalid value for '--eval-every'"),
    (["run", "--dataset", "toy-rad", "--carry", "banana"], "--carry must be all, last:M or tokens:T"),
    (["run", "--dataset", "toy-rad", "--max-usd", "-1"], "Invalid value for '--max-usd'"),
    (["run", "--dataset", "toy-rad", "--bogus"], "No such option: --bogus"),
    (["nope"], "No such command 'nope'"),
    (["export", "--experiment", "x", "--out", ""], "'--out': must name a file or folder (it was empty)"),
    (["scorekeeping", "export", "--name", "x", "--out", " "], "'--out': must name a file or folder"),
    (["scorekeeping", "instances", "--out", ""], "'--out': must name a file or folder"),
])
def test_usage_errors_are_one_line(url: str, args: list[str], why: str) -> None:
    before = counts(url)
    res = pxp("--db", url, *args)
    assert res.exit_code == 2
    line = one_line(res)
    assert line.startswith("error: ") and why in line
    assert counts(url) == before


def test_db_given_twice_is_one_line(url: str, tmp_path: Path) -> None:
    res = pxp("--db", url, "report", "--db", f"sqlite:///{tmp_path / 'other.db'}")
    assert res.exit_code == 2 and "--db given twice" in one_line(res)
    assert not (tmp_path / "other.db").exists()


@pytest.mark.parametrize(("args", "why"), [
    (["--n", "1000000"], "--n must be at most 1000"),
    (["--machine", "openai:gpt-4.1-mini", "--base-url", "not a url"], "--base-url 'not a url': not an http(s) URL"),
    (["--base-url", "http://localhost:99999/v1"], "not a URL"),
    (["--k", "11"], "--k (11) must not be greater than --n (10)"),
])
def test_option_ranges_are_checked_before_anything_is_stored(url: str, args: list[str], why: str) -> None:
    before = counts(url)
    res = pxp("--db", url, "run", "--dataset", "toy-rad", "--no-progress", "--yes", *args)
    assert res.exit_code == 1 and why in one_line(res)
    assert counts(url) == before


def test_text_from_files_and_models_is_printed_literally(url: str, tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"session": "s", "instance": "x", "j": 1, "sender": "machine", "tag": "INIT", "prediction": "p",
         "explanation": "e"},
        {"session": "s", "instance": "x", "j": 2, "sender": "human", "tag": "REFUTE", "prediction": "q",
         "explanation": "e", "annotator": "[red]x[/red] :smile:"}]) + "\n")
    name = "openai:smile: [bold]x[/bold]"
    res = pxp("--db", url, "import", "transcripts", str(f), "--name", name, "--n", "2", "--k", "1")
    assert res.exit_code == 0, res.output
    assert name in res.output and "😄" not in res.output
    res = pxp("--db", url, "import", "transcripts", str(f), "--name", name, "--n", "2", "--k", "1")
    assert res.exit_code == 1 and f"an experiment named {name!r} already exists" in one_line(res)


# --- databases ---------------------------------------------------------------------------


def _foreign(path: Path) -> str:
    con = sqlite3.connect(path)
    con.execute("create table notes (id integer primary key, body text)")
    con.execute("insert into notes (body) values ('keep me')")
    con.commit()
    con.close()
    return f"sqlite:///{path}"


def _tables(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("select name from sqlite_master where type = 'table'"))
    finally:
        con.close()


@pytest.mark.parametrize("args", [["validate"], ["report", "--experiment", "x"], ["demo"],
                                  ["run", "--dataset", "toy-rad", "--no-progress"]])
def test_another_applications_database_is_never_touched(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "app.db"
    foreign = _foreign(db)
    res = pxp("--db", foreign, *args)
    assert res.exit_code == 1
    assert "has tables but no pxp schema" in one_line(res) and "pxp db init" in res.output
    assert _tables(db) == ["notes"]


def test_pxp_db_init_is_the_explicit_way_in(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    foreign = _foreign(db)
    assert pxp("--db", foreign, "db", "init").exit_code == 0
    assert "notes" in _tables(db) and "message" in _tables(db)
    res = pxp("--db", foreign, "validate")
    assert res.exit_code == 0 and "0 session(s) conform" in res.output


def test_reading_commands_never_create_pxp_tables(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()  # an existing, empty file
    res = pxp("--db", f"sqlite:///{db}", "validate")
    assert res.exit_code == 1 and "has no pxp tables yet" in one_line(res)
    assert _tables(db) == []


def _set_revision(url: str, revision: str) -> Path:
    """Write another schema revision into the database's alembic_version, as another tool would."""
    from pxp.storage.store import forget_engine

    path = Path(url.removeprefix("sqlite:///"))
    con = sqlite3.connect(path)
    con.execute("update alembic_version set version_num = ?", (revision,))
    con.commit()
    con.close()
    forget_engine(url)
    return path


def test_an_unknown_schema_revision_is_one_line(url: str) -> None:
    _set_revision(url, "f00dcafe")
    res = pxp("--db", url, "validate")
    assert res.exit_code == 1 and "schema revision 'f00dcafe' is not one of this pxp's" in one_line(res)


@pytest.mark.parametrize(("db", "why"), [("mysql://u:secret@h/db", "SQLite or PostgreSQL, not 'mysql'"),
                                         ("nonsense", "is not a URL"), ("sqlite://", "names no file"),
                                         ("sqlite:///", "names no file"), ("sqlite:///:memory:", "names no file")])
def test_an_unsupported_database_url_is_one_line(db: str, why: str) -> None:
    for cmd in (["validate"], ["demo"]):
        res = pxp("--db", db, *cmd)
        assert res.exit_code == 1 and why in one_line(res) and "secret" not in res.output


def test_a_reading_command_never_migrates(url: str) -> None:
    path = _set_revision(url, "0001")
    for args in (["validate"], ["report", "--experiment", "x"]):
        res = pxp("--db", url, *args)
        assert res.exit_code == 1 and "has an older pxp schema (0001)" in one_line(res)
    con = sqlite3.connect(path)
    assert con.execute("select version_num from alembic_version").fetchall() == [("0001",)]
    con.close()


def _sqlite(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("how", ["demo", "init"])
def test_a_database_pxp_began_to_create_is_finished_by_the_next_demo(tmp_path: Path, how: str) -> None:
    """A first start stopped part-way (a full disk) leaves some of pxp's tables, empty, and no schema
    revision: it is pxp's own, and the next `pxp demo` / `pxp db init` makes it again; a pxp table that
    holds a row is someone's data and is never touched."""
    db = _sqlite(tmp_path / "half.db", "create table dataset (id integer primary key, name text)",
                 "create table instance (id integer primary key, dataset_id integer)")
    res = pxp("--db", f"sqlite:///{db}", *(["demo"] if how == "demo" else ["db", "init"]))
    assert res.exit_code == 0, res.output
    assert "message" in _tables(db) and "alembic_version" in _tables(db)
    kept = _sqlite(tmp_path / "kept.db", "create table dataset (id integer primary key, name text)",
                   "insert into dataset (name) values ('keep me')")
    res = pxp("--db", f"sqlite:///{kept}", "demo")
    assert res.exit_code == 1 and "has tables but no pxp schema" in one_line(res)
    assert _tables(kept) == ["dataset"]


@pytest.mark.parametrize(("labels", "task", "why"), [
    ("", "rad", "--labels names no label"),
    (",", "rad", "--labels names no label"),
    ("Edema,,Pneumonia", "rad", "--labels has an empty label"),
    ("Edema,edema", "rad", "--labels names 'Edema' and 'edema', the same label"),
    ("Épanchement,E\u0301panchement", "rad", "the same label once case, accents"),  # NFC and NFD
    ("Edema, Edema.", "rad", "--labels names 'Edema' and 'Edema.', the same label"),
    ("Edema,Pneumonia", "text", "--labels is the rad task's label set; the 'text' task has none"),
], ids=["empty", "comma", "empty-label", "case", "unicode-form", "punctuation", "no-label-set"])
def test_labels_are_checked_whole_before_anything_is_stored(url: str, tmp_path: Path, labels: str, task: str,
                                                            why: str) -> None:
    f = tmp_path / "rows.csv"
    f.write_text("input,prediction,explanation,image\ncase,Edema,why,x.png\n", encoding="utf-8")
    before = counts(url)
    res = pxp("--db", url, "import", "csv", str(f), "--task", task, "--labels", labels, "--no-progress")
    assert res.exit_code == 1
    line = one_line(res)
    assert line.startswith("error: ") and why in line and "--labels" in line, line
    assert counts(url) == before


@pytest.mark.parametrize("command", [["models"], ["run", "--dataset", "toy-rad", "--machine", "openai:m"]])
@pytest.mark.parametrize("value", ["not a url", "ftp://host/v1", "http://", "localhost:11434", ""])
def test_a_base_url_must_be_http_naming_a_host(url: str, command: list[str], value: str) -> None:
    before = counts(url)
    res = pxp("--db", url, *command, "--base-url", value)
    assert res.exit_code == 1
    assert one_line(res) == (f"error: --base-url {value!r}: not an http(s) URL with a host; give e.g. "
                             "http://localhost:11434/v1")
    assert counts(url) == before
