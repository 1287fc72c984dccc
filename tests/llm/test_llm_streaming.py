"""Streamed replies through the official SDKs (the local server speaks both APIs' server-sent events).

A streamed reply is read into exactly the Completion an unstreamed one gives, and a session stores
exactly the same messages and context with streaming on as with it off; a stream cut off half-way is
a provider fault: the step stores nothing, and the session goes on once the server is fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.agents.base import AgentUnavailable
from pxp.llm.base import Prompt, ProviderOptions, Schema, TextPart, Turn, streaming
from pxp.llm.registry import make_provider
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.engine import step
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.factory import make_agents
from pxp.storage.store import db_session
from pxp.storage.tables import Context, Message, Run, Session
from tests.factories import make_drug
from tests.llm_server import FakeLLM, Reply, Request, adopting_model, answer, serve_both_apis

MODELS = {"anthropic": "anthropic:claude-sonnet-4-6", "openai": "openai:gpt-4.1"}
SCHEMA = Schema("answer", "d", {"type": "object", "properties": {"prediction": {"type": "string"},
                                                                 "explanation": {"type": "string"}}})
LONG = "Esterification of the acid with ethanol under acid catalysis gives the ethyl ester; " * 4


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    yield from serve_both_apis(monkeypatch, retries="0")


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("structured", [True, False])
def test_a_streamed_completion_equals_the_unstreamed_one(server: FakeLLM, api: str, structured: bool) -> None:
    server.handler = lambda req: answer("CCO.CC(=O)O", LONG, structured=structured)
    provider = make_provider(MODELS[api], ProviderOptions(max_retries=0))
    prompt = Prompt(system="s", turns=[Turn("user", [TextPart("target: CCOC(C)=O")])])
    schema = SCHEMA if structured else None
    plain = provider.complete(prompt, max_tokens=300, schema=schema)
    seen: list[str] = []
    streamed = provider.complete(prompt, max_tokens=300, schema=schema, on_text=seen.append)
    assert server.requests[-1].body.get("stream") is True and "stream" not in server.requests[0].body
    assert (streamed.text, streamed.data, streamed.stop_reason) == (plain.text, plain.data, plain.stop_reason)
    assert (streamed.tokens_in, streamed.tokens_out, streamed.cost_usd) == (plain.tokens_in, plain.tokens_out,
                                                                            plain.cost_usd)
    assert len(seen) > 10  # piece by piece, each a longer prefix of the whole
    assert all(b.startswith(a) for a, b in itertools.pairwise(seen))
    assert "Esterification" in seen[-1] and LONG.strip()[-20:] in seen[-1].replace("\\", "")


def _session(engine: Engine, name: str, machine: str) -> tuple[int, dict[Sender, object]]:
    exp = create_experiment(engine, RunConfig(dataset="drug", machine=machine, checker="lexical", split=None,
                                              test_split=None, val_split=None), name=name)
    with db_session(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
        sid = db.exec(select(Session.id).where(Session.run_id == run.id).order_by(col(Session.ordinal))).first()
    return int(sid or 0), make_agents(engine, exp, run)  # type: ignore[return-value]


def _stored(engine: Engine, sid: int) -> tuple[list[tuple[object, ...]], list[object]]:
    with db_session(engine) as db:
        msgs = db.exec(select(Message).where(Message.session_id == sid).order_by(col(Message.j))).all()
        ctx = db.exec(select(Context).where(Context.session_id == sid).order_by(col(Context.j))).all()
        return ([(m.j, m.sender, m.tag, m.prediction, m.explanation, m.match, m.agree, m.changed) for m in msgs],
                [c.content for c in ctx])


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_session_stores_the_same_with_streaming_on_and_off(engine: Engine, server: FakeLLM, api: str) -> None:
    make_drug(engine, "drug")
    server.handler = adopting_model(lambda req: answer("CCO.CC(=O)O", LONG))
    off, agents_off = _session(engine, "off", MODELS[api])
    on, agents_on = _session(engine, "on", MODELS[api])
    while step(engine, off, agents_off).stopped is None:  # type: ignore[arg-type]
        pass
    shown: list[str] = []
    with streaming(shown.append):
        while step(engine, on, agents_on).stopped is None:  # type: ignore[arg-type]
            pass
    assert any("Esterification" in x for x in shown)  # the machine's answers were shown as they came
    assert _stored(engine, on) == _stored(engine, off)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_stream_cut_half_way_stores_nothing_and_the_step_is_taken_later(
    engine: Engine, server: FakeLLM, api: str,
) -> None:
    make_drug(engine, "drug")
    good = adopting_model(lambda req: answer("CCO.CC(=O)O", LONG))

    def cut(req: Request) -> Reply:
        r = good(req)
        r.cut_after = 3
        return r

    server.handler = cut
    sid, agents = _session(engine, "cut", MODELS[api])
    shown: list[str] = []
    with streaming(shown.append), pytest.raises(AgentUnavailable, match="cut off before its end"):
        step(engine, sid, agents)  # type: ignore[arg-type]
    assert shown  # the first pieces were shown ...
    assert _stored(engine, sid) == ([], [])  # ... and nothing half was stored
    server.handler = good
    with streaming(shown.append):
        assert step(engine, sid, agents).message.j == 1  # type: ignore[arg-type]
