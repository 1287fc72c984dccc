"""clembench result folders: write pxp episodes in their layout, read them back and re-score; bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pxp.data.scorekeeping.clembench import GAME, ClembenchEpisode, read_results, write_episode, write_results
from pxp.protocols.scorekeeping.episode import play_episode
from pxp.protocols.scorekeeping.instances import generate
from pxp.protocols.scorekeeping.scores import nan_to_none, score_interactions
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer


def _folder(root: Path) -> dict[str, dict[str, object]]:
    """Two models × two experiments × 3 episodes; returns the expected episode scores per key."""
    expected = {}
    agents = {"perfect-t0.0--perfect-t0.0": SimulatedAnswerer(seed=1),
              "noisy-t0.0--noisy-t0.0": SimulatedAnswerer(seed=9, probe_accuracy=0.7, slot_accuracy=0.8,
                                                           format_error_rate=0.05)}
    for model, agent in agents.items():
        for e, domain in enumerate(("travel-booking", "job-interview")):
            experiment = f"{e}_{domain}"
            for inst in generate(domain, seed=4, n=3):
                rec = play_episode(inst, agent, model=model)
                write_episode(root, model, experiment, inst.game_id, rec, instance=inst)
                expected[f"{model}/{experiment}/episode_{inst.game_id}"] = score_interactions(
                    rec.to_interactions())["episode scores"]
    return expected


def test_write_and_rescore(tmp_path: Path) -> None:
    expected = _folder(tmp_path)
    ep_dir = tmp_path / "perfect-t0.0--perfect-t0.0" / GAME / "0_travel-booking" / "episode_2"
    assert sorted(p.name for p in ep_dir.iterdir()) == ["instance.json", "interactions.json", "scores.json"]
    stored = json.loads((ep_dir / "scores.json").read_text())
    assert stored["episode scores"]["Main Score"] == 100.0
    assert set(stored["turn scores"]) == {"0", "1", "2", "3", "4", "5"}
    events = json.loads((ep_dir / "interactions.json").read_text())["turns"][0]
    assert all("timestamp" in e for e in events)

    result = read_results(tmp_path)
    assert result.errors == []
    got = {e.key: e.scores["episode scores"] for e in result.episodes}
    assert list(got) == sorted(got, key=lambda k: (k.split("/")[0], k.split("/")[1], int(k.split("_")[-1])))
    assert nan_to_none(got) == nan_to_none(expected)
    # the noisy model has an aborted episode whose NaN survived the JSON file
    noisy = [s for k, s in got.items() if k.startswith("noisy")]
    assert any(s["Aborted"] == 1 and math.isnan(s["Accuracy"]) for s in noisy)


def test_write_results_round_trip(tmp_path: Path) -> None:
    _folder(tmp_path / "a")
    first = read_results(tmp_path / "a").episodes
    write_results(tmp_path / "b", first)
    again = read_results(tmp_path / "b")
    assert again.errors == []
    assert [(e.key, e.scores) == (f.key, f.scores) for e, f in zip(again.episodes, first, strict=True)] \
        == [True] * len(first)


def _one(tmp_path: Path) -> tuple[Path, list[Path]]:
    _folder(tmp_path)
    paths = sorted(tmp_path.glob(f"*/{GAME}/*/episode_*/interactions.json"))
    return tmp_path, paths


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: "{not json", "malformed JSON at line 1"),
    (lambda d: json.dumps({k: v for k, v in d.items() if k != "Played Probe Rounds"}),
     "Played Probe Rounds: missing"),
    (lambda d: json.dumps({**d, "probes": [[{**p, "answer": "THOUGHT: yes"} if p.get("value") == 1 else p
                                            for p in rnd] for rnd in d["probes"]]}), "answer: reply 'THOUGHT: yes'"),
])
def test_bad_episode_gives_one_line_and_others_are_read(tmp_path: Path, damage: object, message: str) -> None:
    root, paths = _one(tmp_path)
    bad = paths[-1]  # the perfect model's: every probe is answered
    bad.write_text(damage(json.loads(bad.read_text())))  # type: ignore[operator]
    result = read_results(root)
    assert len(result.errors) == 1
    line = result.errors[0]
    assert "\n" not in line and line.startswith(str(bad)) and message in line
    assert len(result.episodes) == len(paths) - 1
    assert bad not in {e.path for e in result.episodes}


def test_missing_interactions_file(tmp_path: Path) -> None:
    root, paths = _one(tmp_path)
    paths[0].unlink()
    result = read_results(root)
    assert result.errors == [f"{paths[0]}: missing file"]
    assert len(result.episodes) == len(paths) - 1


def test_not_a_folder(tmp_path: Path) -> None:
    assert read_results(tmp_path / "nope").errors == [f"{tmp_path / 'nope'}: not a folder"]


def test_episode_key(tmp_path: Path) -> None:
    inst = generate("job-interview", n=1)[0]
    rec = play_episode(inst, SimulatedAnswerer())
    ep = ClembenchEpisode("m", "1_job-interview", 0, rec, score_interactions(rec.to_interactions()))
    assert ep.key == "m/1_job-interview/episode_0"


def test_an_interactions_file_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    from pxp.data.scorekeeping.clembench import ClembenchError, read_episode

    bad = tmp_path / "interactions.json"
    bad.write_text('{"turns": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ClembenchError, match=r"nested too deeply to read; not a clembench record$"):
        read_episode(bad)
