"""`pxp scorekeeping import-clembench` on a clembench-runs tree of published layouts (v0.9, v1.0, v2.0):
stored scores equal the published scores.json (NaN stored as null), on SQLite and PostgreSQL; a scores.json
that disagrees is one warning line, the episode is still imported."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
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


@pytest.mark.postgres
def test_an_import_racing_another_for_a_new_game_reads_again_and_shares_it(pg_engine: Engine,
                                                                           tmp_path: Path) -> None:
    """Another import creates the same new game while this one runs: this one waits on the game's unique name,
    fails on it, reads the folder again and stores its episodes into that game (nothing lost, no driver text)."""
    from pxp.running.scorekeeping.games import _G
    from pxp.storage.tables import utcnow

    write_runs(tmp_path)
    other = pg_engine.connect()
    tx = other.begin()
    other.execute(_G.insert().values(name="runs", source="clembench", answerer="", seed=0, status="created",
                                     config={}, created_at=utcnow()))
    done: list[Any] = []
    racing = threading.Thread(target=lambda: done.append(import_clembench(pg_engine, tmp_path, "runs")))
    racing.start()
    deadline = time.monotonic() + 60
    with pg_engine.connect() as watch:  # until the import waits on the other's uncommitted game
        while time.monotonic() < deadline and not watch.execute(text(
                "select count(*) from pg_stat_activity where wait_event_type = 'Lock' and datname = "
                "current_database()")).scalar():
            watch.rollback()  # a transaction reads pg_stat_activity once: the next look needs a new one
            time.sleep(0.05)
    tx.commit()
    other.close()
    racing.join(60)
    assert done and (done[0].stored, done[0].errors) == (len(FIXTURES), [])
    assert len(stored_scores(pg_engine, ["runs"])) == len(FIXTURES)


def _copies(root: Path, source: Path, n: int) -> Path:
    """`n` episodes under `root`: copies of the episode folder `source`, numbered 1..n."""
    for k in range(1, n + 1):
        ep = root / "m-t0.0--m-t0.0" / GAME / "0_travel-booking" / f"episode_{k}"
        ep.mkdir(parents=True)
        for f in source.iterdir():
            (ep / f.name).write_bytes(f.read_bytes())
    return root


def test_memory_stays_flat_as_the_folder_grows(engine: Engine, tmp_path: Path) -> None:
    """Episodes are read and inserted a batch at a time (100, each about 58 KB here): three times the
    episodes, about the same peak (holding them all would add about 13 MB)."""
    import tracemalloc

    from pxp.data.scorekeeping.clembench import write_episode
    from pxp.protocols.scorekeeping.episode import play_episode
    from pxp.protocols.scorekeeping.instances import generate
    from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer

    inst = generate("travel-booking", seed=4, n=1)[0]
    source = write_episode(tmp_path / "one", "m", "0_travel-booking", 1,
                           play_episode(inst, SimulatedAnswerer(seed=1), model="m"), instance=inst)
    peaks = []
    for n in (110, 330):
        root = _copies(tmp_path / f"runs{n}", source, n)
        tracemalloc.start()
        try:
            res = import_clembench(engine, root, f"runs{n}")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert (res.stored, res.errors) == (n, [])
    assert peaks[1] < peaks[0] * 1.25 + 256 * 1024, peaks
