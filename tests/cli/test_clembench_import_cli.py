"""`pxp scorekeeping import-clembench` on a clembench-runs tree of published layouts (v0.9, v1.0, v2.0):
stored scores equal the published scores.json (NaN stored as null), on SQLite and PostgreSQL; a scores.json
that disagrees is one warning line, the episode is still imported."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.data.scorekeeping.clembench import GAME
from pxp.protocols.scorekeeping.scores import nan_to_none
from pxp.running.scorekeeping.games import import_clembench, stored_scores
from tests.data.test_clembench_published import FIXTURES, write_runs

runner = CliRunner()


def test_import_published_runs_keeps_every_score(any_engine: Engine, tmp_path: Path) -> None:
    published = write_runs(tmp_path)
    res = import_clembench(any_engine, tmp_path, "runs")
    assert (res.stored, res.skipped, res.errors, res.warnings) == (len(FIXTURES), 0, [], [])
    got = {s.key: (s.scores, s.turn_scores) for s in stored_scores(any_engine, ["runs"], turns=True)}
    assert got == {k: (nan_to_none(v["episode scores"]), nan_to_none(v["turn scores"])) for k, v in published.items()}
    again = import_clembench(any_engine, tmp_path, "runs")
    assert (again.stored, again.skipped) == (0, len(FIXTURES))


def test_cli_import_runs_root_with_a_disagreeing_scores_file(db_url: str, tmp_path: Path) -> None:
    write_runs(tmp_path)
    ep = tmp_path / "v1.0" / "CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0" / GAME / \
        "4_letter-number" / "episode_1"
    scores = json.loads((ep / "scores.json").read_text())
    scores["turn scores"]["4"]["Accuracy"] = 0.5
    scores["episode scores"]["Aborted"] = 0
    (ep / "scores.json").write_text(json.dumps(scores))
    res = runner.invoke(app, ["--db", db_url, "scorekeeping", "import-clembench", str(tmp_path), "--name", "runs"])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == \
        f"game 'runs': {len(FIXTURES)} episodes imported, 0 already there, 0 refused"
    lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("created database")]
    assert lines == [f"warning: {ep / 'scores.json'}: differs from pxp's re-scoring: 'Aborted' 0 there, 1 "
                     "re-scored; turn 4 'Accuracy' 0.5 there, 0.3 re-scored"]
    empty = tmp_path / "nothing"
    empty.mkdir()
    res = runner.invoke(app, ["--db", db_url, "scorekeeping", "import-clembench", str(empty), "--name", "runs"])
    assert res.exit_code == 1 and res.stderr.strip().startswith(f"error: {empty}: no {GAME} episodes found")
