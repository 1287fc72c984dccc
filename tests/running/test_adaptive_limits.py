"""A controlled LLM run under HTTP 429s: the provider's in-flight limit halves and the
run goes on; it pauses only when a call sent at limit 1 is still rate limited."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.llm import limits
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.tables import LLMCall, Run
from tests.cli.test_llm_cli import _drug_first
from tests.factories import make_drug
from tests.llm_server import FakeLLM, Reply, Request, adopting_model


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "RETRY_PAUSE", 0.0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")  # every 429 reaches pxp at once


def _cfg(reps: int = 2) -> RunConfig:
    return RunConfig(dataset="toy-drug", split=None, val_split=None, test_split=None,
                     machine="anthropic:claude-haiku-4-5", reps=reps, concurrency=4, n=4, k=2)


def test_a_run_under_429s_slows_down_and_finishes(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    make_drug(engine)
    good = adopting_model(_drug_first)
    lock = threading.Lock()
    active = {"n": 0, "429": 0}

    def handler(req: Request) -> Reply:
        with lock:
            active["n"] += 1
            over = active["n"] > 1  # the server takes one request at a time
            active["429"] += over
        try:
            time.sleep(0.03)
            return Reply(status=429, error="rate limited") if over else good(req)
        finally:
            with lock:
                active["n"] -= 1

    with FakeLLM(handler) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        exp = create_experiment(engine, _cfg(), name="throttled")
        out = run_experiment(engine, exp.id or 0)
        keys = [k for k in limits._providers if k.startswith(f"anthropic@{server.url}")]
        assert len(keys) == 1
        state = limits.provider_limit(keys[0]).state()
    assert out.status == "finished", out.runs
    assert active["429"] > 0  # the two repetitions did collide
    with DB(engine) as db:
        calls = db.exec(select(LLMCall).where(LLMCall.experiment_id == exp.id)).all()
    assert calls and all(c.error is None for c in calls)  # no call failed: the 429s were absorbed
    assert state.halvings >= 1 and state.ceiling == 4


def test_a_run_pauses_only_after_429_at_limit_1(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    make_drug(engine)
    with FakeLLM(lambda req: Reply(status=429, error="quota exhausted")) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        exp = create_experiment(engine, _cfg(reps=1), name="exhausted")
        out = run_experiment(engine, exp.id or 0)
        sent = len(server.requests)
    assert out.status == "paused"
    with DB(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
    assert run.note is not None and "429" in run.note
    assert sent == 3  # one call, sent at limits 4, 2 and 1; the run paused after the third 429
