"""Scorekeeping runs: an LLM answerer through the real anthropic/openai SDKs against tests/llm_server.py,
every call accounted; a run paused by an API failure and resumed; a run killed mid-way and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, select

from pxp.analysis.scorekeeping import report
from pxp.protocols.scorekeeping.instances import DOMAINS, Instance, generate
from pxp.running.scorekeeping.games import find_game, stored_scores
from pxp.running.scorekeeping.runs import RunSettings, run_game
from pxp.storage.scorekeeping import SkCall, SkEpisode
from tests.llm_server import FakeLLM, Reply, Request, serve_both_apis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    yield from serve_both_apis(monkeypatch, retries="0")


def instances() -> list[Instance]:
    return generate("travel-booking", seed=4, n=2) + generate("job-interview", seed=4, n=2)


def _slot_of(text: str, texts: dict[str, list[str]]) -> str | None:
    return next((slot for slot, qs in texts.items() if any(q in text for q in qs)), None)


def careful_player(req: Request) -> Reply:
    """Answers each question with the asked value (read from the first prompt) and each probe truthfully
    (yes iff the slot's value is in one of its own answers). It sees only what the SDK sent."""
    msgs = [m for m in req.body["messages"] if m["role"] != "system"]

    def text(m: dict[str, Any]) -> str:
        c = m["content"]
        return c if isinstance(c, str) else "".join(b["text"] for b in c if b.get("type") == "text")

    first, last = text(msgs[0]), text(msgs[-1])
    domain = next(d for d in DOMAINS.values() if f'starts with "{d.tag}:"' in first)
    values = {slot: line.split(": ", 1)[1] for slot in domain.values for line in first.splitlines()
              if line.startswith(f"{slot.upper()}: ")}
    if last.startswith("ME:"):
        slot = _slot_of(last, {s: list(q) for s, q in domain.probe_questions.items()})
        assert slot is not None
        said = any(values[slot].lower() in text(m).lower() for m in msgs if m["role"] == "assistant")
        return Reply(text="ASIDE: yes" if said else "ASIDE: no\n")
    slot = _slot_of(last, {s: list(q) for s, q in domain.requests.items()})
    assert slot is not None and last.startswith(f"{domain.tag}: ")
    return Reply(text=f"ANSWER: It is {values[slot]}.")


def count(engine: Engine, table: type) -> int:
    with engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.mark.parametrize("spec", ["anthropic:claude-sonnet-4-6", "openai:gpt-4.1"])
def test_llm_answerer_through_the_sdk(engine: Engine, server: FakeLLM, spec: str) -> None:
    server.handler = careful_player
    res = run_game(engine, RunSettings(name="llm", answerer=spec, instances=instances(), concurrency=3))
    assert res.finished and res.stored == 4 and res.failed is None
    rows = stored_scores(engine, ["llm"], turns=True)
    model = spec.split(":")[1]
    assert {r.key for r in rows} == {f"{model}/{d}/episode_{k}" for d in DOMAINS for k in (0, 1)}
    for r in rows:  # a perfect player: every probe right, every slot filled
        assert r.scores["Accuracy"] == 1.0 and r.scores["Slot-Filling-Accuracy"] == 1.0
        assert r.scores["Main Score"] == 100.0 and r.scores["Aborted"] == 0
        assert r.scores["Request Count"] == 5 + 6 * 5
    # 35 calls per episode, each accounted with the server's usage; probes never enter the dialogue
    assert len(server.requests) == 4 * 35 == count(engine, SkCall)
    with engine.connect() as c:
        calls = c.execute(select(SkCall.__table__)).mappings().all()  # type: ignore[attr-defined]
    assert {(r["provider"], r["model"]) for r in calls} == {tuple(spec.split(":"))}
    assert sum(r["purpose"] == "answer" for r in calls) == 4 * 5
    assert all(r["tokens_in"] == 100 and r["tokens_out"] == 20 and r["error"] is None for r in calls)
    for req in server.requests:
        earlier = req.texts()[:-1]
        assert not any(t.startswith("ME:") for t in earlier)
        assert req.texts()[1] == "Ok."
    game = find_game(engine, "llm")
    assert game is not None and game.status == "finished"


def test_api_failure_pauses_and_rerun_resumes(engine: Engine, server: FakeLLM) -> None:
    n = {"calls": 0}

    def flaky(req: Request) -> Reply:
        n["calls"] += 1
        return Reply(status=500, error="overloaded") if n["calls"] == 2 * 35 + 10 else careful_player(req)

    server.handler = flaky
    settings = RunSettings(name="g", answerer="anthropic:claude-sonnet-4-6", instances=instances(), concurrency=1)
    res = run_game(engine, settings)
    assert not res.finished and res.stored == 2 and res.failed is not None and "500" in res.failed
    game = find_game(engine, "g")
    assert game is not None and game.status == "paused" and game.note == res.failed
    assert count(engine, SkEpisode) == 2
    with engine.connect() as c:
        errors = c.execute(select(SkCall.__table__.c.error).where(  # type: ignore[attr-defined]
            SkCall.__table__.c.error.is_not(None))).scalars().all()  # type: ignore[attr-defined]
    assert len(errors) == 1 and count(engine, SkCall) == 2 * 35 + 10  # the failed call and the lost episode's
    server.handler = careful_player
    res = run_game(engine, settings)
    assert res.finished and res.stored == 2 and res.skipped == 2
    assert count(engine, SkEpisode) == 4 and count(engine, SkCall) == 2 * 35 + 10 + 2 * 35


def test_a_killed_run_resumes_to_the_same_scores(tmp_path: Path) -> None:
    """A real crash (SIGKILL mid-run): the re-run stores the rest, and the scores equal an uninterrupted run's."""
    url = f"sqlite:///{tmp_path / 'sk.db'}"
    cmd = [sys.executable, "-c", "from pxp.cli.main import main; main()", "--db", url, "scorekeeping", "run",
           "--answerer", "simulated", "--name", "g", "--seed", "9", "--concurrency", "2", "--latency-ms", "4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    engine = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if (tmp_path / "sk.db").exists():
                engine = engine or create_engine(url)
                try:
                    if count(engine, SkEpisode) >= 3:
                        break
                except Exception:  # the schema is being created
                    continue
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert engine is not None
    first = count(engine, SkEpisode)
    assert 3 <= first < 20, "the run was not interrupted mid-way"
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"game 'g': {20 - first} episodes stored, {first} already there, 20 in all")
    clean = [*cmd[:cmd.index("g")], "clean", *cmd[cmd.index("g") + 1:]]
    assert subprocess.run(clean, env=env, capture_output=True, timeout=300).returncode == 0
    a, b = report(engine, ["g"]), report(engine, ["clean"])
    assert json.dumps(a["episodes"], sort_keys=True) == json.dumps(
        b["episodes"], sort_keys=True)
    assert a["models"] == b["models"]
    engine.dispose()
