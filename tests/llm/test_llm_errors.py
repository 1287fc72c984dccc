"""API failures surviving the SDKs' retries become one clear line (LLMError), for both
providers, against the local wire-format server; and an OpenAI-compatible server that
refuses json_schema is asked in text."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from pxp.llm.base import LLMError, Prompt, ProviderOptions, Schema, TextPart, Turn
from pxp.llm.registry import make_provider
from tests.llm_server import FakeLLM, Reply, Request, answer

PROMPT = Prompt("You are terse.", [Turn("user", [TextPart("Hello", cache=True)])])
SCHEMA = Schema("answer", "An answer.", {
    "type": "object", "additionalProperties": False, "required": ["prediction", "explanation"],
    "properties": {"prediction": {"type": "string"}, "explanation": {"type": "string"}},
})
SPECS = ["anthropic:claude-haiku-4-5", "openai:gpt-4o-mini"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with FakeLLM() as s:
        yield s


def _provider(spec: str, s: FakeLLM, **opts: float | int):  # type: ignore[no-untyped-def]
    url = s.url if spec.startswith("anthropic") else s.openai_url
    return make_provider(spec, ProviderOptions(base_url=url, **opts))  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", SPECS)
def test_401_is_not_retried_and_names_the_key(server: FakeLLM, spec: str) -> None:
    server.handler = lambda req: Reply(status=401, error="invalid x-api-key")
    p = _provider(spec, server, max_retries=2)
    with pytest.raises(LLMError) as e:
        p.complete(PROMPT, max_tokens=20)
    env = "ANTHROPIC_API_KEY" if spec.startswith("anthropic") else "OPENAI_API_KEY"
    assert f"API error 401 (authentication failed: check the API key ({env}); invalid x-api-key)" in str(e.value)
    assert e.value.status == 401 and len(server.requests) == 1
    assert "sk-test" not in str(e.value)


@pytest.mark.parametrize("spec", SPECS)
def test_timeout(server: FakeLLM, spec: str) -> None:
    released = threading.Event()

    def slow(req: Request) -> Reply:  # answers only once the client has given up
        released.wait(30)
        return answer("a", "b")

    server.handler = slow
    p = _provider(spec, server, max_retries=0, timeout=0.2)
    try:
        with pytest.raises(LLMError, match=r"timed out after 0.2s"):
            p.complete(PROMPT, max_tokens=20)
    finally:
        released.set()


@pytest.mark.parametrize("spec", SPECS)
def test_connection_refused(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with socket.socket() as sock:  # bound and never listening: refused, and no other process can take the port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        p = make_provider(spec, ProviderOptions(base_url=f"http://127.0.0.1:{port}", max_retries=0))
        with pytest.raises(LLMError, match=f"cannot connect to http://127.0.0.1:{port}"):
            p.complete(PROMPT, max_tokens=20)


@pytest.mark.parametrize("spec", SPECS)
def test_usage_is_read(server: FakeLLM, spec: str) -> None:
    usage = ({"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 1000,
              "cache_creation_input_tokens": 50} if spec.startswith("anthropic")
             else {"prompt_tokens": 1007, "completion_tokens": 3, "cached_tokens": 1000})
    server.handler = lambda req: Reply(data={"prediction": "p", "explanation": "e"}, usage=usage)
    out = _provider(spec, server).complete(PROMPT, max_tokens=20, schema=SCHEMA)
    assert out.data == {"prediction": "p", "explanation": "e"}
    assert (out.tokens_in, out.tokens_out, out.cache_read) == (7, 3, 1000)
    assert out.cache_write == (50 if spec.startswith("anthropic") else 0)
    if spec.startswith("anthropic"):
        assert out.cost_usd == pytest.approx((7 * 1.0 + 3 * 5.0 + 1000 * 0.1 + 50 * 1.25) / 1e6)
    else:
        assert out.cost_usd is None  # a base URL: the OpenAI provider prices only the OpenAI API


def test_anthropic_cost_uses_cache_prices(server: FakeLLM) -> None:
    server.handler = lambda req: Reply(text="Yes", usage={"input_tokens": 1000, "output_tokens": 1000,
                                                          "cache_read_input_tokens": 1000,
                                                          "cache_creation_input_tokens": 1000})
    out = _provider("anthropic:claude-haiku-4-5", server).complete(PROMPT, max_tokens=10)
    assert out.cost_usd == pytest.approx((1.0 + 5.0 + 0.1 + 1.25) / 1000)
    req = server.requests[-1].body
    assert req["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert req["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_openai_compatible_server_without_json_schema_is_asked_in_text(server: FakeLLM) -> None:
    def handler(req: Request) -> Reply:
        if "response_format" in req.body:
            return Reply(status=400, error="response_format json_schema is not supported")
        return Reply(text="Prediction: p\nExplanation: e")

    server.handler = handler
    p = _provider("openai:llama3.1", server, max_retries=0)
    first = p.complete(PROMPT, max_tokens=20, schema=SCHEMA)
    assert first.data is None and "Prediction: p" in first.text
    p.complete(PROMPT, max_tokens=20, schema=SCHEMA)
    assert ["response_format" in r.body for r in server.requests] == [True, False, False]


def test_call_totals_on_sqlite_and_postgresql(any_engine) -> None:  # type: ignore[no-untyped-def]
    from sqlmodel import select

    from pxp.agents.base import CallRecord
    from pxp.analysis.calls import call_totals, grand_total
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.engine import record_calls
    from pxp.running.pxp.experiments import create_experiment
    from pxp.storage.store import db_session
    from pxp.storage.tables import Run
    from tests.factories import make_drug

    make_drug(any_engine, "drug")
    exp = create_experiment(any_engine, RunConfig(dataset="drug", reps=2))
    with db_session(any_engine) as db:
        runs = db.exec(select(Run).where(Run.experiment_id == exp.id).order_by(Run.repetition)).all()
    for run in runs:
        record_calls(any_engine, [
            CallRecord(provider="anthropic", model="m", purpose="ask", tokens_in=10, tokens_out=2, cache_read=5,
                       cost_usd=0.5),
            CallRecord(provider="anthropic", model="m", purpose="ask", attempt=2, tokens_in=1, error="format: x",
                       cost_usd=0.25),
            CallRecord(provider="openai", model="local", purpose="agree", tokens_in=3, latency_ms=4.0),
        ], experiment_id=exp.id, run_id=run.id)
    rows = call_totals(any_engine, exp.id or 0)
    assert [(r["repetition"], r["provider"], r["purpose"], r["calls"], r["errors"]) for r in rows] == [
        (1, "anthropic", "ask", 2, 1), (1, "openai", "agree", 1, 0),
        (2, "anthropic", "ask", 2, 1), (2, "openai", "agree", 1, 0)]
    assert rows[0]["cost_usd"] == 0.75 and rows[1]["cost_usd"] is None and rows[1]["latency_ms"] == 4.0
    total = grand_total(rows)
    assert total["calls"] == 6 and total["tokens_in"] == 28 and total["cache_read"] == 10
    assert total["cost_usd"] == 1.5


def test_a_checker_with_no_yes_no_answer_counts_as_disagreement_in_an_evaluation(
    server: FakeLLM, engine: Engine
) -> None:
    """In an evaluation (LEARN's validation, the test split) an unusable checker answer is a
    wrong explanation, as an unusable machine answer is; it must not fail the repetition."""
    from pxp.agents.base import Answer
    from pxp.agents.checker import CheckedHumanProxy, Checker
    from pxp.agents.simulated import SimulatedConfig, SimulatedMachine
    from pxp.running.pxp.engine import instance_view
    from pxp.running.pxp.evaluate import evaluate
    from pxp.storage.store import dataset_instances, db_session
    from pxp.tasks.registry import task_spec
    from tests.factories import make_rad

    ds = make_rad(engine, per_label=1)
    with db_session(engine) as db:
        views = [instance_view(engine, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds)]
    server.handler = lambda req: Reply(text="Maybe.")
    checker = Checker(_provider("openai:gpt-4o-mini", server, max_retries=0), task_spec("rad", {}))
    human = CheckedHumanProxy(checker, match_kind="label")

    class Reworded(SimulatedMachine):  # right labels, explanations the checker must judge
        def ask(self, q: Any) -> Answer:
            return Answer(q.instance.reference.prediction, "a differently worded report")

    calls: list[Any] = []
    score = evaluate(Reworded(views, SimulatedConfig()), human, views, (), record=calls.extend)
    assert (score.prediction, score.explanation, score.both, score.instances) == (1.0, 0.0, 0.0, len(views))
    assert calls and all(c.purpose == "eval" for c in calls)
    assert sum(1 for c in calls if c.error and c.error.startswith("format")) == 5 * len(views)
