"""`pxp run --grid FILE` end to end and `pxp report --study NAME` (docs/research.md, Grids and comparisons)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment
from tests.factories import make_rad

cli = CliRunner()
GRID = """
name = "pilot"
[grid]
machine = [{ label = "weak", machine = "simulated", simulated = { accuracy = 0.1, adopt = 0.0 } },
           { label = "strong", machine = "simulated", simulated = { accuracy = 1.0, adopt = 1.0 } }]
dataset = ["toy-rad"]
seed = [0, 1]
[run]
n = 4
k = 3
reps = 2
shuffle = true
"""
NAMES = ["pilot/weak/toy-rad/s0", "pilot/weak/toy-rad/s1", "pilot/strong/toy-rad/s0", "pilot/strong/toy-rad/s1"]


def pxp(url: str, *args: str) -> Any:
    return cli.invoke(app, ["--db", url, *args], catch_exceptions=False)


@pytest.fixture
def url(db_url: str) -> str:
    make_rad(get_engine(db_url), per_label=3)
    return db_url


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


def test_a_grid_runs_as_one_study_and_reports_paired_comparisons(url: str, grid: Path) -> None:
    est = pxp(url, "run", "--grid", str(grid), "--estimate", "--format", "json")
    assert est.exit_code == 0, est.output
    figures = json.loads(est.stdout)
    assert [r["experiment"] for r in figures["experiments"]] == NAMES
    assert figures["total"]["calls"] == sum(r["calls"] for r in figures["experiments"]) > 0
    with DB(get_engine(url)) as db:
        assert db.exec(select(Experiment)).all() == []  # --estimate starts nothing

    res = pxp(url, "run", "--grid", str(grid), "--no-progress")
    assert res.exit_code == 0, res.output
    assert "Study pilot: 4 experiment(s)" in res.stdout and "Paired comparison, weak vs strong" in res.stdout
    assert "McNemar p" in res.stdout and "study pilot: experiment 4/4 pilot/strong/toy-rad/s1" in res.stderr
    with DB(get_engine(url)) as db:
        exps = db.exec(select(Experiment).order_by(Experiment.id)).all()  # type: ignore[arg-type]
    assert [e.name for e in exps] == NAMES and {e.status for e in exps} == {"finished"}
    assert {e.config["study"] for e in exps} == {"pilot"} and exps[0].config["simulated"]["accuracy"] == 0.1

    rep = pxp(url, "report", "--study", "pilot", "--format", "json")
    assert rep.exit_code == 0, rep.output
    study = json.loads(rep.stdout)
    assert [r["experiment"] for r in study["experiments"]] == NAMES
    # weak and strong on the same instances, once per seed; never across seeds
    pairs = [(c["a"], c["b"]) for c in study["comparisons"]]
    assert pairs == [(NAMES[0], NAMES[2]), (NAMES[1], NAMES[3])]
    for c in study["comparisons"]:
        m = {r["metric"]: r for r in c["metrics"]}
        assert c["pairs"] == 10 and c["instances"] == 5  # 2 repetitions × 5 train instances
        two = m["two_way"]
        assert two["b"] == 1.0 and two["a_only"] == 0 and two["difference"] < 0 and two["ci_high"] <= 0
        assert two["b_only"] == round((two["b"] - two["a"]) * 10)
    same = pxp(url, "report", "--experiment", NAMES[0], "--experiment", NAMES[2], "--compare", "--format", "json")
    assert json.loads(same.stdout)["metrics"] == study["comparisons"][0]["metrics"]

    again = pxp(url, "run", "--grid", str(grid))
    assert again.exit_code == 1 and "already exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1


def test_bad_grid_input_is_one_line(url: str, grid: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GRID.replace("seed = [0, 1]", "seed = []"))
    res = pxp(url, "run", "--grid", str(bad))
    assert res.exit_code == 1 and res.stderr.strip() == f"error: {bad}: [grid].seed is empty; list at least one value"
    res = pxp(url, "run", "--grid", str(tmp_path / "none.toml"))
    assert res.exit_code == 1 and "cannot read the grid file" in res.stderr
    res = pxp(url, "run", "--grid", str(grid), "--n", "6")
    assert res.exit_code == 1 and "--grid takes the run options from" in res.stderr and "--n" in res.stderr
    res = pxp(url, "run", "--grid", str(grid), "--distributed")  # SQLite: not silently run in-process
    assert res.exit_code == 1 and "PostgreSQL" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    with DB(get_engine(url)) as db:
        assert db.exec(select(Experiment)).all() == []  # refused before the study was created
    est = pxp(url, "run", "--grid", str(grid), "--distributed", "--estimate", "--format", "json")
    assert est.exit_code == 0 and json.loads(est.stdout)["total"]["calls"] > 0  # the estimate needs no queue
    res = pxp(url, "report", "--study", "nope")
    assert res.exit_code == 1 and "no study named 'nope'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = pxp(url, "report")
    assert res.exit_code == 1 and "--experiment (or --study) is required" in res.stderr
