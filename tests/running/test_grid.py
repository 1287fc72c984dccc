"""Grid files (docs/research.md, Grids and comparisons): parsing, complete validation before anything is created,
expansion."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.running.pxp.controlled.grid import (
    GridError,
    check_study,
    create_study,
    parse_grid,
    prepare_study,
    study_estimate,
)
from pxp.storage.tables import Experiment
from tests.factories import make_rad

GOOD = """
name = "pilot"
[grid]
machine = ["simulated", { label = "weak", machine = "simulated", simulated = { accuracy = 0.2 } }]
dataset = ["toy-rad"]
seed = [0, 1]
n = [4, 6]
[run]
k = 3
reps = 2
simulated = { adopt = 0.5 }
"""


def test_a_grid_expands_to_every_combination_named_by_its_coordinates() -> None:
    study = parse_grid(GOOD, "g.toml")
    assert study.name == "pilot" and len(study.points) == 8
    names = [p.name for p in study.points]
    assert names[0] == "pilot/simulated/toy-rad/s0/n4" and "pilot/weak/toy-rad/s1/n6" in names
    weak = next(p for p in study.points if p.name == "pilot/weak/toy-rad/s1/n6")
    assert weak.config.simulated == {"adopt": 0.5, "accuracy": 0.2}
    assert (weak.config.n, weak.config.k, weak.config.reps, weak.config.seed) == (6, 3, 2, 1)
    assert weak.coords == {"machine": "weak", "dataset": "toy-rad", "seed": 1, "n": 6, "k": 3}
    assert not study.split_given


def test_a_grid_has_the_defaults_of_pxp_run() -> None:
    """[run] without learn runs LEARN as `pxp run` does (on); learn = false turns it off."""
    import typer.main

    from pxp.cli.main import app

    cli = typer.main.get_command(app)
    run = cli.get_command(typer.Context(cli), "run")  # type: ignore[attr-defined]  (loaded when asked for)
    learn = next(p for p in run.params if p.name == "learn")
    assert learn.default is True
    assert all(p.config.learn is True for p in parse_grid(GOOD, "g.toml").points)
    off = parse_grid(GOOD + "learn = false\n", "g.toml")
    assert not any(p.config.learn for p in off.points)


@pytest.mark.parametrize(("text", "message"), [
    ("name = 'x'\n[grid\n", "g.toml: not valid TOML"),
    ("name = 'x'\ncolour = 1\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\n", "unknown key 'colour'"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\nmodel=['a']\n", "unknown key [grid].model"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\n[run]\ntemprature=0\n",
     "unknown key [run].temprature"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[]\n", "g.toml: [grid].seed is empty"),
    ("name = 'x'\n[grid]\nmachine=[]\ndataset=['d']\nseed=[0]\n", "[grid].machine is empty"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\nseed=[0]\n", "[grid].dataset is required"),
    ("[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\n", "g.toml: name is required"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=['zero']\n", "[grid].seed must list integers"),
    ("name = 'x'\n[grid]\nmachine=['simulated', 'simulated']\ndataset=['d']\nseed=[0]\n", "lists 'simulated' twice"),
    ("name = 'x'\n[grid]\nmachine=[{machine='simulated', speed=2}]\ndataset=['d']\nseed=[0]\n",
     "g.toml: [grid].machine[0].speed is not a known key"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\n[run]\nsimulated={accuracy='high'}\n",
     "g.toml: [run].simulated.accuracy must be a number"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\nn=[4]\n[run]\nn=5\n",
     "[run].n is also a [grid] axis"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\n[run]\nreps='3'\n",
     "[run].reps must be an integer"),
    ("name = 'x'\n[grid]\nmachine=['simulated']\ndataset=['d']\nseed=[0]\nk=[5]\n[run]\nn=4\n",
     "g.toml: x/simulated/d/s0/k5: --k (5) must not be greater than --n (4)"),
    ("name = 'x'\n[grid]\nmachine=['nosuch']\ndataset=['d']\nseed=[0]\n", "machine 'nosuch' is not available"),
])
def test_a_bad_grid_is_one_line_naming_the_file_and_key(text: str, message: str) -> None:
    with pytest.raises(GridError) as e:
        parse_grid(text, "g.toml")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("g.toml: ")


def test_nothing_is_created_unless_every_point_checks(engine: Engine, tmp_path: Path) -> None:
    make_rad(engine, per_label=2)
    path = tmp_path / "g.toml"
    path.write_text(GOOD.replace('dataset = ["toy-rad"]', 'dataset = ["toy-rad", "missing"]'))
    with pytest.raises(GridError, match="no dataset named 'missing'"):
        prepare_study(engine, path)
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []


def test_a_study_records_its_name_and_refuses_to_run_twice(engine: Engine, tmp_path: Path) -> None:
    make_rad(engine, per_label=2)
    path = tmp_path / "g.toml"
    path.write_text(GOOD)
    study, estimates = prepare_study(engine, path)
    assert all(p.config.split == "train" for p in study.points)  # as `pxp run`: train when there is one
    est = study_estimate(study, estimates)
    assert est["total"]["calls"] == sum(e.calls for e in estimates.values()) > 0
    assert est["total"]["usd"] == 0
    exps = create_study(engine, study, estimates)
    assert len(exps) == 8
    with DB(engine) as db:
        stored = db.exec(select(Experiment)).all()
    assert {e.config["study"] for e in stored} == {"pilot"} and all("estimate" in e.config for e in stored)
    assert stored[0].config["grid"]["machine"] == "simulated"
    with pytest.raises(GridError, match="an experiment named 'pilot/simulated/toy-rad/s0/n4' already exists"):
        check_study(engine, study)
