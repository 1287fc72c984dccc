"""`pxp report --experiment A --experiment B --compare` (docs/research.md, Grids and comparisons)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pxp.cli.main import app

cli = CliRunner()
BOTH = [("machine", "INIT"), ("human", "RATIFY"), ("machine", "RATIFY")]
HUMAN_ONLY = [("machine", "INIT"), ("human", "RATIFY"), ("machine", "REFUTE"), ("human", "RATIFY")]


def pxp(url: str, *args: str) -> Any:
    return cli.invoke(app, ["--db", url, *args], catch_exceptions=False)


@pytest.fixture
def url(db_url: str, tmp_path: Path) -> str:
    for name, sessions in (("A", {"i1": BOTH, "i2": BOTH, "i3": BOTH}), ("B", {"i1": BOTH, "i2": HUMAN_ONLY,
                                                                              "i3": HUMAN_ONLY})):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(
            json.dumps({"session": i, "instance": i, "j": j, "sender": s, "tag": t,
                        "explanation": "the same reason throughout"}) + "\n"
            for i, msgs in sessions.items() for j, (s, t) in enumerate(msgs, start=1)))
        res = pxp(db_url, "import", "transcripts", str(path), "--name", name, "--n", "4", "--k", "3")
        assert res.exit_code == 0, res.output
    return db_url


def test_compare_prints_paired_differences(url: str) -> None:
    res = pxp(url, "report", "--experiment", "A", "--experiment", "B", "--compare", "--format", "json")
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    m = {r["metric"]: r for r in cmp["metrics"]}
    assert cmp["pairs"] == 3 and m["two_way"]["a_only"] == 2 and m["two_way"]["b_only"] == 0
    assert m["two_way"]["difference"] == pytest.approx(2 / 3) and m["two_way"]["p_value"] == pytest.approx(0.5)
    assert m["one_way_human"]["difference"] == 0.0
    table = pxp(url, "report", "--experiment", "A", "--experiment", "B", "--compare")
    assert table.exit_code == 0 and "McNemar p" in table.stdout and "+0.667" in table.stdout


def test_compare_needs_two_experiments(url: str) -> None:
    res = pxp(url, "report", "--experiment", "A", "--compare")
    assert res.exit_code == 1 and "exactly two experiments" in res.stderr
    res = pxp(url, "report", "--experiment", "A", "--experiment", "nope", "--compare")
    assert res.exit_code == 1 and "no experiment named 'nope'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = pxp(url, "report", "--experiment", "A", "--experiment", "B", "--compare", "--format", "markdown")
    assert res.exit_code == 1 and "table, json or csv" in res.stderr
