"""Who holds power changes only on purpose (docs/operations.md, Login and roles), on SQLite and PostgreSQL:
look-alike emails, groups, dataset and experiment names are one identity (refused naming the stored one,
or resolved to it), `pxp users add` without --role changes no role, and two admins demoting or
removing each other at the same moment never leave the team without an admin."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, delete, text
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.generic import import_table
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import alembic_config, find_dataset, find_experiment, upgrade
from pxp.storage.tables import TeamMember
from pxp.team.access import TeamError, add_member, remove_member
from tests.factories import make_rad, race

runner = CliRunner()
TRIALS = 30


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("db_url" if request.param == "sqlite" else "pg_url"))


def _team(url: str) -> list[tuple[str, str, str]]:
    r = runner.invoke(app, ["--db", url, "users", "list", "--format", "json"])
    return [(x["kind"], x["name"], x["role"]) for x in json.loads(r.output)]


@pytest.mark.parametrize(("args", "line", "code"), [
    (("bоss@example.org", "--role", "admin"),  # a Cyrillic о inside a Latin word
     "error: an email address: 'bоss' mixes Latin with U+043E (CYRILLIC SMALL LETTER O), which look alike; "
     "type it in one script", 1),
    (("ann@exаmple.org",),
     "error: an email address: 'exаmple' mixes Latin with U+0430 (CYRILLIC SMALL LETTER A), which look alike; "
     "type it in one script", 1),
    (("аре@example.org", "--role", "admin"),  # wholly Cyrillic: a look-alike of the stored ape@
     "error: 'аре@example.org' looks the same as 'ape@example.org', already on the team as researcher: "
     "give that one exactly", 1),
    (("ｂｏｓｓ@example.org",),  # full-width: the ASCII address itself
     "user boss@example.org is already on the team as admin; nothing changed (give --role to change it)", 0),
    (("ape@example.org",),  # an existing member without --role: nothing changes
     "user ape@example.org is already on the team as researcher; nothing changed (give --role to change it)", 0),
    (("ape@example.org", "--role", "researcher"),
     "user ape@example.org is already on the team as researcher; nothing changed", 0),
    (("rаdiology", "--group", "--role", "admin"),
     "error: a group name: 'rаdiology' mixes Latin with U+0430 (CYRILLIC SMALL LETTER A), which look alike; "
     "type it in one script", 1),
])
def test_look_alikes_and_careless_adds_change_nothing(url: str, args: tuple[str, ...], line: str, code: int) -> None:
    for given in (("boss@example.org", "--role", "admin"), ("ape@example.org", "--role", "researcher"),
                  ("radiology", "--group", "--role", "researcher")):
        assert runner.invoke(app, ["--db", url, "users", "add", *given]).exit_code == 0
    before = _team(url)
    r = runner.invoke(app, ["--db", url, "users", "add", *args])
    assert (r.exit_code, r.output.strip().splitlines()[-1:]) == (code, [line])
    assert _team(url) == before


def test_a_new_member_without_a_role_is_an_annotator_and_a_role_changes_with_role(url: str) -> None:
    r = runner.invoke(app, ["--db", url, "users", "add", "rita@example.org"])
    assert "added user rita@example.org as annotator" in r.output.splitlines()
    r = runner.invoke(app, ["--db", url, "users", "add", "rita@example.org", "--role", "researcher"])
    assert r.output.strip() == "updated user rita@example.org: annotator → researcher"
    r = runner.invoke(app, ["--db", url, "users", "remove", "ｒｉｔａ@example.org"])  # resolved to the stored one
    assert (r.exit_code, r.output.strip()) == (0, "removed rita@example.org")
    assert _team(url) == []


def test_the_stored_identity_refuses_a_look_alike_written_behind_the_rule(any_engine: Engine) -> None:
    add_member(any_engine, "ape@example.org", "admin")
    with DB(any_engine) as db:  # a row written without add_member (another tool): the unique index holds
        db.add(TeamMember(kind="email", name="аре@example.org", role="admin"))
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            db.commit()
    assert [m.name for m in DB(any_engine).exec(select(TeamMember)).all()] == ["ape@example.org"]


def test_look_alike_dataset_and_experiment_names(any_engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "cases.csv"
    f.write_text("key,input\nk1,x\n", encoding="utf-8")
    import_table(any_engine, f, name="ape")
    for name, why in (("аре", "the dataset name 'аре' looks the same as the dataset 'ape'"),
                      ("Dеmo", "'Dеmo' mixes Latin with U+0435 (CYRILLIC SMALL LETTER IE)")):
        with pytest.raises(ImportProblems) as e:
            import_table(any_engine, f, name=name)
        assert why in str(e.value) and "\n" not in str(e.value)
    assert import_table(any_engine, f, name="ａｐｅ").dataset == "ape"  # full-width: the same dataset
    make_rad(any_engine, name="rad")
    create_experiment(any_engine, RunConfig(dataset="rad"), name="pace")
    for name, why in (("pаce", "'pаce' mixes Latin with U+0430 (CYRILLIC SMALL LETTER A)"),
                      ("расе", "the experiment's name 'расе' looks the same as the experiment 'pace'")):
        with pytest.raises(RunError, match=re.escape(why)):
            create_experiment(any_engine, RunConfig(dataset="rad"), name=name)
    with DB(any_engine) as db:
        assert find_dataset(db, name="аре") is not None and find_dataset(db, name="аре").name == "ape"  # type: ignore[union-attr]
        assert find_experiment(db, name_or_id="расе").name == "pace"  # type: ignore[union-attr]


def _outcome(fn) -> str:  # type: ignore[no-untyped-def]
    try:
        fn()
    except TeamError as err:
        assert "is the last admin" in str(err)
        return "refused"
    return "done"


def test_two_admins_demoting_or_removing_each_other_leave_one_admin(any_engine: Engine) -> None:
    a, b = "ada@example.org", "bob@example.org"
    moves = {"demote": lambda who: add_member(any_engine, who, "researcher"),
             "remove": lambda who: remove_member(any_engine, who)}
    for trial in range(TRIALS):
        with DB(any_engine) as db:
            db.exec(delete(TeamMember))  # type: ignore[call-overload]
            db.commit()
        add_member(any_engine, a, "admin")
        add_member(any_engine, b, "admin")
        pair = [("demote", "demote"), ("remove", "remove"), ("demote", "remove")][trial % 3]
        out = race(2, lambda i, pair=pair: _outcome(lambda: moves[pair[i]]((a, b)[i])))  # type: ignore[misc]
        with DB(any_engine) as db:
            admins = db.exec(select(TeamMember.name).where(TeamMember.role == "admin")).all()
        assert len(admins) == 1, (trial, out, admins)
        assert sorted(out) == ["done", "refused"]



def test_migration_0014_gives_stored_rows_their_identity(any_engine: Engine) -> None:
    cfg = alembic_config(any_engine)
    with any_engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0013")
    with any_engine.begin() as conn:  # look-alikes stored before the rule: the oldest keeps the identity
        for name in ("ape@example.org", "аре@example.org", "ann@example.org"):
            conn.execute(text("INSERT INTO team_member (kind, name, role, added_by, created_at) "
                              "VALUES ('email', :n, 'admin', '', CURRENT_TIMESTAMP)"), {"n": name})
    upgrade(any_engine)
    with DB(any_engine) as db:
        rows = db.exec(select(TeamMember.name, TeamMember.identity).order_by(TeamMember.id)).all()  # type: ignore[arg-type]
    assert [(n, i is not None) for n, i in rows] == [
        ("ape@example.org", True), ("аре@example.org", False), ("ann@example.org", True)]
    assert remove_member(any_engine, "аре@example.org") == "аре@example.org"  # the look-alike can be removed
