"""Adaptive concurrency per provider, against the local wire-format server.

On HTTP 429 the provider's in-flight limit halves and the call is sent again; it recovers by one
slot per RECOVER_AFTER successes; a 429 is raised only for a call sent at limit 1.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pxp.llm import limits
from pxp.llm.anthropic import AnthropicProvider
from pxp.llm.base import LLMError, Prompt, ProviderOptions, TextPart, Turn
from pxp.llm.openai import OpenAIProvider
from tests.llm_server import FakeLLM, Reply, Request, answer

PROMPT = Prompt(system="s", turns=[Turn("user", [TextPart("hello")])])


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "RETRY_PAUSE", 0.0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    limits.set_call_limit(8)


def _provider(kind: str, server: FakeLLM) -> Any:
    """A provider whose SDK does not retry (max_retries=0): every 429 reaches pxp.llm.limits at once."""
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-6", ProviderOptions(base_url=server.url, max_retries=0, timeout=10))
    return OpenAIProvider("gpt-4.1", ProviderOptions(base_url=server.openai_url, max_retries=0, timeout=10))


def _capacity(cap: int, delay: float = 0.05) -> tuple[Any, dict[str, int]]:
    """A server that answers at most `cap` requests at once and sends 429 beyond."""
    lock = threading.Lock()
    seen = {"active": 0, "max_ok": 0, "429": 0, "ok": 0}

    def handler(req: Request) -> Reply:
        with lock:
            seen["active"] += 1
            over = seen["active"] > cap
            if over:
                seen["429"] += 1
            else:
                seen["max_ok"] = max(seen["max_ok"], seen["active"])
        try:
            time.sleep(delay)
            if over:
                return Reply(status=429, error="rate limited")
            with lock:
                seen["ok"] += 1
            return answer("A", "because")
        finally:
            with lock:
                seen["active"] -= 1

    return handler, seen


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_429s_halve_the_limit_and_every_call_gets_through(kind: str) -> None:
    handler, seen = _capacity(2)
    with FakeLLM(handler) as server:
        p = _provider(kind, server)
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda _: p.complete(PROMPT, max_tokens=50), range(24)))
        state = limits.provider_limit(p.limit_key).state()
    assert len(outs) == 24 and seen["ok"] == 24  # nothing paused: every call answered
    assert seen["429"] > 0
    assert state.halvings >= 1 and state.limit <= 4 and state.ceiling == 8


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_429_at_limit_1_is_raised_after_halving_down(kind: str) -> None:
    with FakeLLM(lambda req: Reply(status=429, error="slow down")) as server:
        p = _provider(kind, server)
        with pytest.raises(LLMError) as e:
            p.complete(PROMPT, max_tokens=50)
        state = limits.provider_limit(p.limit_key).state()
        sent = len(server.requests)
    assert e.value.status == 429 and "429" in str(e.value)
    assert state.limit == 1 and state.in_flight == 0
    assert sent == 4  # sent at limits 8, 4, 2 and 1; only the last 429 is raised


def test_the_limit_recovers_one_slot_per_recover_after_successes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "RECOVER_AFTER", 3)
    replies = iter([Reply(status=429, error="x")] * 2 + [answer("A", "b")] * 7)
    with FakeLLM(lambda req: next(replies)) as server:
        p = _provider("openai", server)
        p.complete(PROMPT, max_tokens=50)  # 429 at 8, 429 at 4, answered at 2
        lim = limits.provider_limit(p.limit_key)
        assert lim.state().limit == 2
        for _ in range(2):
            p.complete(PROMPT, max_tokens=50)
        assert lim.state().limit == 3  # three successes: one slot back
        for _ in range(3):
            p.complete(PROMPT, max_tokens=50)
        assert lim.state().limit == 4


def test_other_errors_are_not_retried_and_leave_the_limit() -> None:
    with FakeLLM(lambda req: Reply(status=500, error="boom")) as server:
        p = _provider("openai", server)
        with pytest.raises(LLMError):
            p.complete(PROMPT, max_tokens=50)
        state = limits.provider_limit(p.limit_key).state()
        assert len(server.requests) == 1
    assert state.limit == 8 and state.halvings == 0 and state.in_flight == 0


def test_a_burst_of_429s_halves_once() -> None:
    """Calls sent before a halving do not halve again: 8 concurrent 429s take 8 down to 4, not 1."""
    lim = limits.AdaptiveLimit("burst", 8)
    gate = threading.Barrier(8)
    first = threading.local()

    def send() -> str:
        if not getattr(first, "done", False):
            first.done = True
            gate.wait(timeout=5)
            raise _RateLimited()
        return "ok"

    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda _: lim.call(send, limits.is_rate_limited), range(8)))
    assert outs == ["ok"] * 8
    assert lim.state().limit == 4 and lim.state().halvings == 1


class _RateLimited(Exception):
    status_code = 429


def test_set_call_limit_resets_the_providers() -> None:
    lim = limits.provider_limit("reset-test")
    with pytest.raises(_RateLimited):
        lim.call(_raise, limits.is_rate_limited)
    assert lim.state().limit == 1
    limits.set_call_limit(6)
    assert lim.state() == limits.LimitState(6, 6, 0, 0)


def _raise() -> None:
    raise _RateLimited()
