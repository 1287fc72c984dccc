"""`pxp scorekeeping ...` end to end on SQLite (and once on PostgreSQL): instances, a simulated run and its
resume, the report's json shape and values, clembench import (bad episodes one line each), export, round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.protocols.scorekeeping.episode import play_episode
from pxp.protocols.scorekeeping.instances import generate, generate_experiments
from pxp.protocols.scorekeeping.scores import leaderboard, nan_to_none, score_interactions
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer
from pxp.storage.scorekeeping import SkCall, SkEpisode
from pxp.storage.store import get_engine, sqlite_file

runner = CliRunner()


def run(db_url: str, *args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["--db", db_url, "scorekeeping", *args])
    return res.exit_code, res.stdout, res.stderr


def expected_report(seed: int, n: int, domains: tuple[str, ...], **sim: float) -> dict[str, object]:
    """The report computed directly from the pure core (no storage, no runner)."""
    agent = SimulatedAnswerer(seed=seed, **sim)
    episodes = {}
    for d in domains:
        for k, inst in enumerate(generate(d, seed=seed, n=n)):
            scores = score_interactions(play_episode(inst, agent, model="simulated").to_interactions(), 5)
            episodes[f"simulated/{d}/episode_{k}"] = nan_to_none(scores["episode scores"])
    return {"episodes": episodes, "models": leaderboard(("simulated", s) for s in episodes.values())}


def test_instances_to_stdout_and_file(db_url: str, tmp_path: Path) -> None:
    code, out, _ = run(db_url, "instances", "--domain", "job-interview", "--seed", "7", "--n", "3")
    assert code == 0
    assert json.loads(out) == generate_experiments(seed=7, n=3, domains=("job-interview",))
    f = tmp_path / "instances.json"
    code, out, _ = run(db_url, "instances", "--out", str(f))
    assert code == 0 and out.strip() == f"wrote 20 instances to {f}"
    assert json.loads(f.read_text()) == generate_experiments()
    code, out, err = run(db_url, "instances", "--domain", "cooking")
    assert code == 1 and out == ""
    assert err.strip() == "error: --domain: unknown domain 'cooking'; known: travel-booking, job-interview"
    assert sqlite_file(db_url) is not None and not sqlite_file(db_url).exists()  # type: ignore[union-attr]


def same(got: dict[str, object], want: dict[str, object]) -> None:
    """Equal episode scores; leaderboard equal up to float summation order (episodes sorted differently)."""
    assert got["episodes"] == json.loads(json.dumps(want["episodes"]))
    models = want["models"]
    assert isinstance(models, dict) and got["models"].keys() == models.keys()  # type: ignore[attr-defined]
    for m, row in models.items():
        assert got["models"][m] == pytest.approx(row, rel=1e-12)  # type: ignore[index]


SIM = ("--probe-accuracy", "0.8", "--slot-accuracy", "0.9", "--format-error-rate", "0.03")


def test_run_report_and_rerun(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "instances.json"
    f.write_text(json.dumps(generate_experiments(seed=11, n=4)))
    code, out, err = run(db_url, "run", "--answerer", "simulated", "--name", "sim", "--instances", str(f),
                         "--seed", "11", "--concurrency", "3", *SIM)
    assert code == 0, err
    assert out.startswith("game 'sim': 8 episodes stored, 0 already there, 8 in all")
    code, out, _ = run(db_url, "report", "--name", "sim", "--format", "json")
    assert code == 0
    want = expected_report(11, 4, ("travel-booking", "job-interview"), probe_accuracy=0.8, slot_accuracy=0.9,
                           format_error_rate=0.03)
    same(json.loads(out), want)
    assert set(want["models"]["simulated"]) == {"% Played", "Quality Score", "Quality Score (std)"}  # type: ignore[index]
    # a re-run stores nothing new and makes no call
    engine = get_engine(db_url)
    with engine.connect() as c:
        calls = c.execute(select(func.count()).select_from(SkCall)).scalar_one()
    assert calls > 8 * 6
    code, out, _ = run(db_url, "run", "--answerer", "simulated", "--name", "sim")
    assert code == 0 and out.startswith("game 'sim': 0 episodes stored, 8 already there, 8 in all")
    code, out, _ = run(db_url, "run", "--answerer", "simulated", "--name", "sim", "--instances", str(f))
    assert code == 0 and out.startswith("game 'sim': 0 episodes stored, 8 already there, 8 in all")
    other = tmp_path / "other.json"
    other.write_text(json.dumps(generate_experiments(seed=12, n=4)))
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "sim", "--instances", str(other))
    assert code == 1 and err.strip() == ("error: game 'sim' was started on other instances; resume it without "
                                         "--instances or use another --name")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    code, _, err = run(db_url, "run", "--answerer", "openai:gpt-4.1", "--name", "sim")
    assert code == 1 and err.strip() == "error: game 'sim' holds episodes of simulated; use another --name"
    with engine.connect() as c:
        assert c.execute(select(func.count()).select_from(SkCall)).scalar_one() == calls
        assert c.execute(select(func.count()).select_from(SkEpisode)).scalar_one() == 8
    code, out, _ = run(db_url, "report", "--name", "sim")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["model", "episodes", "%", "Played", "Quality", "Score", "Quality", "Score", "(std)"]
    played = want["models"]["simulated"]["% Played"]  # type: ignore[index]
    assert lines[2].split()[:3] == ["simulated", "8", f"{played:.1f}"]
    code, out, _ = run(db_url, "report", "--name", "sim", "--format", "csv")
    assert code == 0 and len(out.splitlines()) == 9 and out.startswith("episode,Accuracy,Kappa")


def test_bad_run_input_is_one_line(db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"experiments": [{"name": "x", "game_instances": [{"game_id": 0}]}]}')
    code, out, err = run(db_url, "run", "--answerer", "simulated", "--name", "b", "--instances", str(bad))
    assert code == 1 and out == ""
    assert err.strip() == f"error: {bad}: experiments[0].game_instances[0].slots: missing"
    bad.write_text("{not json")
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "b", "--instances", str(bad))
    assert err.strip() == f"error: {bad}: malformed JSON at line 1 column 2: Expecting property name enclosed " \
                          "in double quotes"
    bad.write_text('{"experiments": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "b", "--instances", str(bad))
    assert code == 1 and err.strip() == f"error: {bad}: arrays or objects nested too deeply to read; not " \
                                        "clembench's instances.json"
    code, _, err = run(db_url, "run", "--answerer", "gpt4", "--name", "b")
    assert code == 1 and err.strip().startswith("error: --answerer 'gpt4': use simulated or provider:model")
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "b", "--probe-accuracy", "1.5")
    assert code == 1 and err.strip() == "error: --probe-accuracy must be in [0, 1], not 1.5"
    assert not Path(str(sqlite_file(db_url))).exists()  # nothing was created for bad input
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "b", "--instances",
                       str(tmp_path / "none.json"))
    assert code == 1 and err.strip() == f"error: {tmp_path / 'none.json'}: cannot read: No such file or directory"
    code, _, err = run(db_url, "report", "--name", "nope")
    assert code == 1 and "error:" in err


def test_import_bad_episodes_export_and_round_trip(db_url: str, tmp_path: Path) -> None:
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "sim", "--seed", "5", *SIM)
    assert code == 0, err
    exported = tmp_path / "results"
    code, out, _ = run(db_url, "export", "--name", "sim", "--out", str(exported))
    assert code == 0 and out.strip() == f"wrote 20 episodes to {exported}"
    ep = exported / "simulated" / "privateshared" / "travel-booking" / "episode_3"
    assert {p.name for p in ep.iterdir()} == {"interactions.json", "scores.json", "instance.json"}
    # damage three episodes: malformed JSON, a missing field, an unknown tag in a probe reply
    bad_json = exported / "simulated" / "privateshared" / "travel-booking" / "episode_0" / "interactions.json"
    bad_json.write_text('{"probes": [')
    missing = exported / "simulated" / "privateshared" / "travel-booking" / "episode_1" / "interactions.json"
    d = json.loads(missing.read_text())
    del d["Played Probe Rounds"]
    missing.write_text(json.dumps(d))
    tagged = exported / "simulated" / "privateshared" / "job-interview" / "episode_1" / "interactions.json"
    d = json.loads(tagged.read_text())
    probe = d["probes"][0][0]
    assert probe["value"] in (0, 1)
    probe["answer"] = probe["answer"].replace("ASIDE:", "FOO:")
    tagged.write_text(json.dumps(d))
    boms = exported / "simulated" / "privateshared" / "job-interview" / "episode_2" / "interactions.json"
    boms.write_bytes(b"\xef\xbb\xbf" + boms.read_bytes())  # a byte-order mark is accepted
    code, out, err = run(db_url, "import-clembench", str(exported), "--name", "back")
    assert code == 1  # all or nothing, like every importer
    assert out.strip() == ("game 'back': nothing imported: 3 episode(s) refused (fix them, or --keep-good to "
                           "store the others)")
    assert len(err.strip().splitlines()) == 3
    code, out, _ = run(db_url, "report", "--name", "back", "--format", "json")
    assert code == 1
    code, out, err = run(db_url, "import-clembench", str(exported), "--name", "back", "--keep-good")
    assert code == 1
    assert out.strip() == "game 'back': 17 episodes imported, 0 already there, 3 refused"
    lines = err.strip().splitlines()
    assert len(lines) == 3 and all(ln.startswith("error: ") for ln in lines)
    assert f"{tagged}: probes[0][0].answer: reply " in lines[0]
    assert lines[1].startswith(f"error: {bad_json}: malformed JSON at line 1")
    assert lines[2] == f"error: {missing}: Played Probe Rounds: missing"
    code, out, _ = run(db_url, "report", "--name", "back", "--format", "json")
    back = json.loads(out)
    code, out, _ = run(db_url, "report", "--name", "sim", "--format", "json")
    sim = json.loads(out)
    bad_keys = {"simulated/travel-booking/episode_0", "simulated/travel-booking/episode_1",
                "simulated/job-interview/episode_1"}
    assert set(back["episodes"]) == set(sim["episodes"]) - bad_keys
    assert all(back["episodes"][k] == sim["episodes"][k] for k in back["episodes"])
    # re-import is idempotent; a clean export → import → export → import round trip keeps every score
    code, out, _ = run(db_url, "import-clembench", str(exported), "--name", "back", "--keep-good")
    assert "0 episodes imported, 17 already there" in out
    clean = tmp_path / "clean"
    run(db_url, "export", "--name", "sim", "--out", str(clean))
    code, out, _ = run(db_url, "import-clembench", str(clean), "--name", "rt1")
    assert code == 0 and out.strip() == "game 'rt1': 20 episodes imported, 0 already there, 0 refused"
    again = tmp_path / "again"
    run(db_url, "export", "--name", "rt1", "--out", str(again))
    run(db_url, "import-clembench", str(again), "--name", "rt2")
    reports = [json.loads(run(db_url, "report", "--name", n, "--format", "json")[1]) for n in ("sim", "rt1", "rt2")]
    same(reports[1], reports[0])
    same(reports[2], reports[0])
    for p in clean.rglob("interactions.json"):
        q = again / p.relative_to(clean)
        a, b = json.loads(p.read_text()), json.loads(q.read_text())
        assert a == b  # timestamps included: they were stored on import
    # a run cannot resume into an imported game
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--name", "rt1")
    assert code == 1 and err.strip() == "error: game 'rt1' holds an imported clembench folder; use another --name"


def test_llm_run_without_a_key_stores_nothing(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("ANTHROPIC_PROFILE", raising=False)
    code, out, err = run(db_url, "run", "--answerer", "anthropic:claude-sonnet-4-6", "--name", "x")
    assert code == 1 and out == ""
    assert err.strip() == ("error: anthropic: no API key; set ANTHROPIC_API_KEY in the environment or "
                           "Streamlit secrets")
    assert not Path(str(sqlite_file(db_url))).exists()


def test_import_of_nothing_creates_nothing(db_url: str, tmp_path: Path) -> None:
    code, _, err = run(db_url, "import-clembench", str(tmp_path / "missing"), "--name", "x")
    assert code == 1 and err.strip() == f"error: {tmp_path / 'missing'}: not a folder"
    assert not Path(str(sqlite_file(db_url))).exists()


@pytest.mark.postgres
def test_run_import_report_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    code, _, err = run(pg_url, "run", "--answerer", "simulated", "--name", "sim", "--seed", "3",
                       "--concurrency", "4", *SIM)
    assert code == 0, err
    run(pg_url, "export", "--name", "sim", "--out", str(tmp_path / "r"))
    code, out, _ = run(pg_url, "import-clembench", str(tmp_path / "r"), "--name", "rt")
    assert code == 0 and "20 episodes imported" in out
    a = json.loads(run(pg_url, "report", "--name", "sim", "--format", "json")[1])
    b = json.loads(run(pg_url, "report", "--name", "rt", "--format", "json")[1])
    want = expected_report(3, 10, ("travel-booking", "job-interview"), probe_accuracy=0.8, slot_accuracy=0.9,
                           format_error_rate=0.03)
    same(a, want)
    same(b, want)


def test_instances_with_a_byte_order_mark_are_read_and_a_bad_episode_file_is_named(db_url: str, tmp_path: Path) -> None:
    code, _, _ = run(db_url, "instances", "--n", "2", "--out", str(tmp_path / "i.json"))
    assert code == 0
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "i.json").read_bytes())
    code, _, err = run(db_url, "run", "--answerer", "simulated", "--instances", str(bom), "--name", "b")
    assert code == 0, err
    code, _, _ = run(db_url, "export", "--name", "b", "--out", str(tmp_path / "x"))
    bad = next((tmp_path / "x").rglob("interactions.json"))
    bad.write_bytes(bad.read_bytes().replace(b"{", b"{\n\xf3", 1))
    code, out, err = run(db_url, "import-clembench", str(tmp_path / "x"), "--name", "y")
    assert code == 1 and out.startswith("game 'y': nothing imported: 1 episode(s) refused")
    assert err.strip() == f"error: {bad}: line 2: not UTF-8 text (byte 0xf3)"
