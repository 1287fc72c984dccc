"""`pxp users` (docs/operations.md, Login and roles): the first admin, roles updated, bad input in one line, on SQLite
and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from pxp.team.access import role_for

runner = CliRunner()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("db_url" if request.param == "sqlite" else "pg_url"))


def pxp(url: str, *args: str) -> object:
    return runner.invoke(app, ["--db", url, *args], catch_exceptions=False)


def test_first_admin_then_roles_then_list(url: str) -> None:
    engine = get_engine(url)
    r = pxp(url, "users", "list")
    assert r.exit_code == 0 and "add the first admin" in r.output  # type: ignore[attr-defined]
    r = pxp(url, "users", "add", "Boss@Example.org", "--role", "admin")
    assert r.exit_code == 0 and "added user boss@example.org as admin" in r.output  # type: ignore[attr-defined]
    assert pxp(url, "users", "add", "ann@example.org").exit_code == 0  # type: ignore[attr-defined]
    assert pxp(url, "users", "add", "radiology", "--group", "--role", "researcher").exit_code == 0  # type: ignore[attr-defined]
    r = pxp(url, "users", "add", "ann@example.org", "--role", "researcher")
    assert "updated user ann@example.org as researcher" in r.output  # type: ignore[attr-defined]
    assert role_for(engine, "boss@example.org") == "admin"
    assert role_for(engine, "ann@example.org") == "researcher"
    assert role_for(engine, "x@example.org", ["radiology"]) == "researcher"
    r = pxp(url, "users", "list", "--format", "json")
    rows = json.loads(r.output)  # type: ignore[attr-defined]
    assert [(x["kind"], x["name"], x["role"]) for x in rows] == [
        ("email", "boss@example.org", "admin"), ("email", "ann@example.org", "researcher"),
        ("group", "radiology", "researcher")]
    assert pxp(url, "users", "remove", "ann@example.org").exit_code == 0  # type: ignore[attr-defined]
    assert role_for(engine, "ann@example.org") is None


@pytest.mark.parametrize(("args", "line"), [
    (("users", "add", "nobody", "--role", "admin"), "error: 'nobody' is not an email address"),
    (("users", "add", "a@b.c", "--role", "king"),
     "error: unknown role 'king': use one of annotator, researcher, admin"),
    (("users", "remove", "gone@b.c"), "error: 'gone@b.c' is not on the team"),
    (("users", "list", "--format", "xml"), "error: unknown format 'xml' (table or json)"),
])
def test_bad_input_is_one_line(db_url: str, args: tuple[str, ...], line: str) -> None:
    r = runner.invoke(app, ["--db", db_url, *args])
    assert r.exit_code == 1
    assert r.output.strip().splitlines()[-1] == line, r.output
