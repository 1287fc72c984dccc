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
    assert "updated user ann@example.org: annotator → researcher" in r.output  # type: ignore[attr-defined]
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
    (("users", "add", "nobody", "--role", "admin"),
     "error: 'nobody' is not an email address: An email address must have an @-sign."),
    (("users", "add", "ann\u200b@example.org"),
     "error: an email address may not contain U+200B (ZERO WIDTH SPACE), which no login can match; type it again"),
    (("users", "add", "mailto:ann@example.org"), "error: 'mailto:ann@example.org': give the address without mailto:"),
    (("users", "add", "[bold]ann@example.org"),
     "error: '[bold]ann@example.org' contains markup or brackets ([), which an email address cannot have"),
    (("users", "add", "a@b@example.org"), "error: 'a@b@example.org' is not an email address: "
     "The part after the @-sign contains invalid characters: '@'."),
    (("users", "add", "radi\u202eology", "--group"),
     "error: a group name may not contain U+202E (RIGHT-TO-LEFT OVERRIDE), which no login can match; type it again"),
    (("users", "add", "ann\x07@example.org"),
     "error: an email address may not contain U+0007 (control character), which no login can match; type it again"),
    (("users", "add", "a@b.c", "--role", "king"),
     "error: unknown role 'king': use one of annotator, researcher, admin"),
    (("users", "remove", "gone@b.c"), "error: 'gone@b.c' is not on the team"),
    (("users", "list", "--format", "xml"), "error: unknown format 'xml' (table or json)"),
])
def test_bad_input_is_one_line(db_url: str, args: tuple[str, ...], line: str) -> None:
    r = runner.invoke(app, ["--db", db_url, *args])
    assert r.exit_code == 1
    assert r.output.strip().splitlines()[-1] == line, r.output


def test_the_last_admin_can_neither_be_removed_nor_demoted(url: str) -> None:
    engine = get_engine(url)
    assert pxp(url, "users", "add", "boss@example.org", "--role", "admin").exit_code == 0  # type: ignore[attr-defined]
    for args in (("users", "remove", "boss@example.org"), ("users", "add", "boss@example.org", "--role", "annotator")):
        r = runner.invoke(app, ["--db", url, *args])
        assert r.exit_code == 1
        assert r.output.strip().splitlines() == [
            "error: boss@example.org is the last admin: add another admin first (pxp users add EMAIL --role admin)"]
        assert role_for(engine, "boss@example.org") == "admin"
    assert pxp(url, "users", "add", "admins", "--group", "--role", "admin").exit_code == 0  # type: ignore[attr-defined]
    assert pxp(url, "users", "remove", "boss@example.org").exit_code == 0  # type: ignore[attr-defined]
    assert role_for(engine, "boss@example.org") is None
    r = runner.invoke(app, ["--db", url, "users", "remove", "admins", "--group"])
    assert r.exit_code == 1 and "admins is the last admin" in r.output
