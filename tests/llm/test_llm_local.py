"""Local models a hospital would run (docs/research.md, Local models): the local server answers as reasoning
models served by Ollama, vLLM, llama.cpp and LM Studio do (tests/llm_server.py MODES), through the real SDKs.

A run against each mode ends with the same Table 1 as against a plain server, streamed or not; the thinking is
kept on the call, never read as the answer.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.agents.base import ContextTooLong
from pxp.analysis.queries import Selection
from pxp.analysis.tables import table1
from pxp.llm.base import LLMConfigError, Prompt, ProviderOptions, Schema, TextPart, Turn, streaming
from pxp.llm.local import LOCAL_TIMEOUT, listening, split_thinking
from pxp.llm.registry import make_provider
from pxp.protocols.settings import SettingError
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.repetition import run_repetition
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.factory import make_agents
from pxp.storage.store import db_session
from pxp.storage.tables import Experiment, LLMCall, Run, Session
from tests.factories import make_text
from tests.llm_server import THINKING, FakeLLM, Reply, adopting_model, answer, request_tokens, serve_both_apis

SCHEMA = Schema("answer", "d", {"type": "object", "properties": {"prediction": {"type": "string"},
                                                                 "explanation": {"type": "string"}}})
OPENAI_THINKING = ("think-inline", "thinking-inline", "think-close-only", "reasoning_content", "reasoning")
EXPLANATION = "patchy airspace consolidation in the left lower zone with air bronchograms"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    monkeypatch.setenv("PXP_LLM_SLOW_AFTER", "0.5")  # the slow-first mode's first call waits 1.2 s
    yield from serve_both_apis(monkeypatch, retries="0")


def test_split_thinking_reads_the_answer_after_the_thinking() -> None:
    assert split_thinking('<think>\n{"prediction": "A"}\n</think>\n\n{"prediction": "B"}') == (
        '{"prediction": "B"}', '{"prediction": "A"}')
    assert split_thinking("  <THINKING>Effusion?</THINKING>Prediction: B") == ("Prediction: B", "Effusion?")
    assert split_thinking("the template opened it\n</think>\nPrediction: B") == ("Prediction: B",
                                                                                 "the template opened it")
    assert split_thinking("<think>cut off at the token limit") == ("", "cut off at the token limit")
    assert split_thinking("Prediction: B\nExplanation: a <think> tag in prose") == (
        "Prediction: B\nExplanation: a <think> tag in prose", "")


def test_a_structured_reply_nested_too_deeply_is_kept_as_text(server: FakeLLM) -> None:
    deep = '{"prediction": ' + "[" * 100_000 + "]" * 100_000 + "}"
    server.handler = lambda req: Reply(text=deep)
    provider = make_provider("openai:qwen3:8b", ProviderOptions(max_retries=0))
    out = provider.complete(Prompt(system="s", turns=[Turn("user", [TextPart("Case 1.")])]), max_tokens=300,
                            schema=SCHEMA)
    assert (out.text, out.data) == (deep, None)


@pytest.mark.parametrize("mode", [*OPENAI_THINKING, "anthropic-thinking"])
@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("streamed", [False, True])
def test_thinking_is_kept_apart_from_the_answer(server: FakeLLM, mode: str, structured: bool, streamed: bool) -> None:
    api = "anthropic" if mode == "anthropic-thinking" else "openai"
    spec = "anthropic:claude-sonnet-4-6" if api == "anthropic" else "openai:qwen3:8b"
    server.handler = lambda req: answer("Pneumonia", EXPLANATION, structured=structured)
    provider = make_provider(spec, ProviderOptions(max_retries=0))
    prompt = Prompt(system="s", turns=[Turn("user", [TextPart("Case 1.")])])
    schema = SCHEMA if structured else None
    plain = provider.complete(prompt, max_tokens=300, schema=schema)
    server.mode = mode
    shown: list[str] = []
    out = provider.complete(prompt, max_tokens=300, schema=schema, **({"on_text": shown.append} if streamed else {}))
    assert (out.text, out.data, out.stop_reason) == (plain.text, plain.data, plain.stop_reason)
    assert plain.thinking is None and out.thinking == THINKING
    assert (out.tokens_in, out.tokens_out) == (plain.tokens_in, plain.tokens_out)
    if streamed:  # what the page shows as it comes is the answer, never the thinking ...
        told = shown if mode != "think-close-only" else shown[-1:]  # ... once a closing tag says it was thinking
        assert shown and not any("Okay, the user" in s or "<think" in s for s in told)


def _experiment(engine: Engine, name: str, machine: str) -> Experiment:
    return create_experiment(engine, RunConfig(dataset="toy-text", machine=machine, checker="lexical", reps=1,
                                               seed=3), name=name)


def _table1(engine: Engine, exp: Experiment) -> dict[str, Any]:
    return table1(engine, Selection(experiments=(exp.id or 0,)), n=6).as_json("x")


def _run(engine: Engine, name: str, machine: str, streamed: bool) -> Experiment:
    """A controlled run; streamed, its one repetition runs in this thread with the machine's answers streamed
    (as the Annotate page shows them)."""
    exp = _experiment(engine, name, machine)
    if not streamed:
        assert run_experiment(engine, exp.id or 0).status == "finished"
        return exp
    with db_session(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
    shown: list[str] = []
    with streaming(shown.append):
        assert run_repetition(engine, exp, run, make_agents(engine, exp, run)) == "finished"
    assert shown and "Okay, the user" not in shown[-1]
    return exp


#: each mode of the local server a run is tried against, and the model it is run with
RUN_MODES = [*((m, "openai:qwen3:8b") for m in OPENAI_THINKING), ("anthropic-thinking", "anthropic:claude-sonnet-4-6"),
             ("no-usage", "openai:llama3.1:8b"), ("reasoning+no-usage", "openai:qwen3:8b"),
             ("slow-first", "openai:llama3.1:8b")]


def _calls(engine: Engine, exp: Experiment) -> list[LLMCall]:
    with db_session(engine) as db:
        return list(db.exec(select(LLMCall).where(LLMCall.experiment_id == exp.id).order_by(col(LLMCall.id))).all())


@pytest.mark.parametrize("streamed", [False, True])
def test_a_run_against_each_mode_gives_the_plain_servers_table1(engine: Engine, server: FakeLLM,
                                                                streamed: bool) -> None:
    make_text(engine)
    server.handler = adopting_model(lambda req: answer("Pneumonia", EXPLANATION))
    plain = _table1(engine, _run(engine, "plain", "openai:qwen3:8b", streamed))
    for mode, machine in RUN_MODES:
        server.mode = mode
        said: list[tuple[float, str]] = []
        with listening(lambda line, said=said: said.append((time.monotonic(), line))):
            exp = _run(engine, mode, machine, streamed)
        assert _table1(engine, exp) == plain, mode
        if mode == "slow-first":  # said, and once for the calls waiting together (other modes: no check, a loaded
            # machine may be slow too, and so may a later call here: then it is said again, but never within 0.5 s)
            assert said and {line for _, line in said} == {f"{machine}: waiting for the model to load (no answer "
                                                            "after 0.5 s)"}
            assert all(b - a > 0.5 for (a, _), (b, _) in itertools.pairwise(said)), said
        asked = [c for c in _calls(engine, exp) if c.purpose in ("ask", "eval")]
        assert asked and all(c.error is None for c in asked), mode
        thinks = any(m in mode for m in ("think", "reason"))
        assert all(c.thinking == (THINKING if thinks else None) for c in asked), mode
        if "no-usage" in mode:  # unknown, never zero; no price
            assert all(c.tokens_in is None and c.tokens_out is None and c.cost_usd is None for c in asked), mode
        else:
            assert all(c.tokens_in and c.tokens_out for c in asked), mode


def test_calls_without_usage_are_counted_as_such(engine: Engine, db_url: str, server: FakeLLM) -> None:
    from typer.testing import CliRunner

    from pxp.cli.main import app
    from pxp.running.pxp.controlled.progress import render_usage
    from pxp.running.pxp.controlled.runner import usage_summary

    make_text(engine)
    server.handler = adopting_model(lambda req: answer("Pneumonia", EXPLANATION))
    server.mode = "no-usage"
    exp = _run(engine, "ollama", "openai:llama3.1:8b", False)
    n = len(_calls(engine, exp))
    res = CliRunner().invoke(app, ["--db", db_url, "calls", "--experiment", "ollama"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert f"{n} of {n} call(s) had no usage" in " ".join(res.stdout.split()) and "—" in res.stdout
    lines = render_usage(usage_summary(engine, exp.id or 0))
    assert any(f"{n} call(s) had no usage" in x for x in lines) and not any(" 0/0 " in x for x in lines)
    res = CliRunner().invoke(app, ["--db", db_url, "calls", "--experiment", "ollama", "--format", "json"],
                             catch_exceptions=False)
    assert '"no_usage": ' + str(n) in res.stdout.replace("\n", " ")

def test_the_pause_line_shows_a_cut_reply_as_it_is(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pxp.cli.main import app
    from pxp.storage.store import get_engine
    from tests.llm_server import Reply

    make_text(get_engine(db_url))
    with FakeLLM(lambda req: Reply(text="I am not sure " * 40)) as server:
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")
        res = CliRunner().invoke(app, ["--db", db_url, "run", "--yes", "--dataset", "toy-text",
                                       "--machine", "openai:qwen3:8b",
                                       "--base-url", server.openai_url, "--reps", "1", "--no-progress"],
                                 catch_exceptions=False)
    assert res.exit_code == 2, res.output
    line = next(x for x in res.stderr.splitlines() if x.startswith("paused:"))
    assert "… [truncated]" in line and "\\[" not in line


# --- context windows ----------------------------------------------------------------------------------------------

ENGINES = [("openai", "openai:gpt-4o"), ("vllm", "openai:qwen3:8b"), ("llama.cpp", "openai:qwen3:8b"),
           ("ollama", "openai:llama3.1:8b"), ("lmstudio", "openai:qwen3:8b"),
           ("anthropic", "anthropic:claude-sonnet-4-6")]


@pytest.mark.parametrize(("wording", "machine"), ENGINES)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_prompt_over_the_context_window_pauses_a_controlled_run_with_one_line(
    engine: Engine, server: FakeLLM, wording: str, machine: str, streamed: bool,
) -> None:
    make_text(engine)
    server.handler = adopting_model(lambda req: answer("Pneumonia", EXPLANATION))
    server.mode, server.engine, server.context_tokens = "context", wording, 40
    exp = _experiment(engine, wording, machine)
    with db_session(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
    if streamed:
        with streaming(lambda text: None):
            status = run_repetition(engine, exp, run, make_agents(engine, exp, run))
    else:
        status = run_experiment(engine, exp.id or 0).runs[1][0]
    assert status == "paused"
    with db_session(engine) as db:
        note = str(db.get(Run, run.id).note)  # type: ignore[union-attr]
    assert "\n" not in note and machine in note and "exceeds the model's context window" in note, note
    assert "a prompt of about" in note and "(the server: " in note, note  # the size asked, the server's words
    calls = _calls(engine, exp)
    failed = [c for c in calls if c.error]  # asked once: a controlled run does not re-ask a prompt of a fixed size
    assert len(failed) == 1 and failed[0].id == calls[-1].id and "context window" in str(failed[0].error)


def test_a_live_session_shortens_its_context_oldest_exchanges_first(engine: Engine, server: FakeLLM) -> None:
    from pxp.agents.proxy import HumanProxy
    from pxp.protocols.pxp.rules import Sender
    from pxp.running.pxp.engine import step
    from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
    from pxp.running.pxp.live.turns import machine_for
    from pxp.storage.tables import Context, Message

    make_text(engine)
    # the machine disagrees with every message, so the session grows until the window is reached
    server.handler = lambda req: answer("Effusion" if len(req.body["messages"]) % 4 else "Atelectasis", EXPLANATION)
    eid = create_live_experiment(engine, dataset="toy-text", machine="openai:qwen3:8b", n=9)
    sid = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name="r"))
    assert sid is not None
    agents = {Sender.MACHINE: machine_for(engine, eid), Sender.HUMAN: HumanProxy()}
    for _ in range(4):  # messages 1-4 at full length
        step(engine, sid, agents)  # type: ignore[arg-type]
    server.mode, server.engine = "context", "llama.cpp"
    server.context_tokens = request_tokens(server.requests[-1]) + 10  # message 3's prompt fits, message 5's not
    assert step(engine, sid, agents).message.j == 5  # type: ignore[arg-type]
    over, fitted = server.requests[-2], server.requests[-1]
    assert len(over.body["messages"]) == 6 and len(fitted.body["messages"]) == 4  # system, case, message 3 and 4
    assert fitted.body["messages"][1] == over.body["messages"][1]  # the case is kept
    assert fitted.body["messages"][2:] == over.body["messages"][4:]  # ... and the current exchange
    calls = _calls(engine, Experiment(id=eid))
    assert "context window" in str(calls[-2].error) and calls[-1].error is None
    assert calls[-1].detail == {"context_shortened": {"carried_sessions": 0, "messages": 2}}
    with db_session(engine) as db:
        ctx = db.exec(select(Context).where(Context.session_id == sid, Context.j == 5)).one()
        assert len(ctx.content["prompt"]["turns"]) == 3  # the stored context is what was sent
        assert db.exec(select(Message).where(Message.session_id == sid, Message.j == 5)).one()
    assert step(engine, sid, agents).message.j == 6  # type: ignore[arg-type]
    server.context_tokens = 10  # nothing left to drop: one line, and the step can be taken later
    with pytest.raises(ContextTooLong, match=r"qwen3:8b: a prompt of about \d+ tokens exceeds the model's context "
                                             r"window \(the server: .*\) \(even shortened to the case and the current "
                                             r"exchange\); nothing was stored"):
        step(engine, sid, agents)  # type: ignore[arg-type]
    server.mode = "plain"
    assert step(engine, sid, agents).message.j == 7  # type: ignore[arg-type]


# --- slow first loads -----------------------------------------------------------------------------------------------


def test_a_local_server_gets_a_long_timeout_unless_one_is_set(server: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    provider: Any = make_provider("openai:qwen3:8b", ProviderOptions())
    assert provider.local and provider.options.timeout == LOCAL_TIMEOUT == 180.0
    assert provider.client.timeout == 180.0 and provider.client.max_retries == 2  # retries stay the SDK's own
    assert make_provider("openai:qwen3:8b", ProviderOptions(timeout=5)).client.timeout == 5  # type: ignore[attr-defined]
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert make_provider("openai:gpt-4.1", ProviderOptions()).options.timeout is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_call_that_times_out_pauses_the_run_with_one_line(
    db_url: str, server: FakeLLM, monkeypatch: pytest.MonkeyPatch, streamed: bool,
) -> None:
    from typer.testing import CliRunner

    from pxp.cli.main import app
    from pxp.storage.store import get_engine

    engine = get_engine(db_url)
    make_text(engine)
    server.handler = adopting_model(lambda req: answer("Pneumonia", EXPLANATION))
    server.mode, server.slow_first = "slow-first", 1.5
    monkeypatch.setenv("PXP_LLM_TIMEOUT", "0.8")
    if streamed:
        exp = _experiment(engine, "slow", "openai:qwen3:8b")
        with db_session(engine) as db:
            run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
        with streaming(lambda text: None):
            assert run_repetition(engine, exp, run, make_agents(engine, exp, run)) == "paused"
        with db_session(engine) as db:
            line = str(db.get(Run, run.id).note)  # type: ignore[union-attr]
    else:
        res = CliRunner().invoke(app, ["--db", db_url, "run", "--yes", "--dataset", "toy-text",
                                       "--machine", "openai:qwen3:8b",
                                       "--reps", "1", "--name", "slow"], catch_exceptions=False)
        assert res.exit_code == 2, res.output
        # the progress said what the wait was, then the pause line
        assert "openai:qwen3:8b: waiting for the model to load (no answer after 0.5 s)" in res.stderr
        line = next(x for x in res.stderr.splitlines() if x.startswith("paused:"))
    assert "openai:qwen3:8b: the request timed out after 0.8s" in line and "resumed" in line, line


# --- choosing a model ------------------------------------------------------------------------------------------------


def test_pxp_models_lists_a_servers_models_and_checks_one(db_url: str) -> None:
    from typer.testing import CliRunner

    from pxp.cli.main import app

    def pxp(*args: str) -> Any:
        return CliRunner().invoke(app, ["--db", db_url, "models", *args], catch_exceptions=False)

    with FakeLLM() as server:
        server.models = ["qwen3:8b", "llama3.1:8b", "deepseek-r1:14b"]
        res = pxp("--base-url", server.openai_url)
        assert res.exit_code == 0 and res.stdout.split() == ["deepseek-r1:14b", "llama3.1:8b", "qwen3:8b"]
        assert pxp("--base-url", server.openai_url, "--model", "qwen3:8b").exit_code == 0
        res = pxp("--base-url", server.openai_url, "--model", "qwen3:32b")
        assert res.exit_code == 1 and "openai:qwen3:32b: the server does not list this model (3 listed)" in res.stderr
        url = server.openai_url
    res = pxp("--base-url", url)  # the server is gone: one line
    assert res.exit_code == 1 and "cannot connect to" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# --- images within the model's limit ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("machine", "max_px", "sent", "limit"), [
    ("openai:llava:13b", "672", (672, 560), "max_image_px 672"),
    ("openai:gpt-4.1", None, (921, 768), "openai 2048 px"),
    ("anthropic:claude-sonnet-4-6", None, (1174, 978), "anthropic 1568 px"),  # Claude's 1.15 megapixels
])
def test_images_go_at_the_largest_size_allowed_downscaled_once(
    engine: Engine, server: FakeLLM, monkeypatch: pytest.MonkeyPatch, machine: str, max_px: str | None,
    sent: tuple[int, int], limit: str,
) -> None:
    import base64
    import io

    from PIL import Image

    from pxp.llm.images import CACHE
    from pxp.running.pxp.engine import step
    from tests.factories import make_rad_images

    if max_px is not None:
        monkeypatch.setenv("PXP_MAX_IMAGE_PX", max_px)
    make_rad_images(engine, "rad-img", size=(2400, 2000))
    server.handler = adopting_model(lambda req: answer("Atelectasis", "volume loss of the right lower lobe"))
    exp = create_experiment(engine, RunConfig(dataset="rad-img", machine=machine, checker="lexical", split=None,
                                              test_split=None, val_split=None), name=f"img-{max_px}")
    with db_session(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
        sid = db.exec(select(Session.id).where(Session.run_id == run.id).order_by(col(Session.ordinal))).first()
    agents = make_agents(engine, exp, run)
    CACHE.clear()
    while step(engine, sid or 0, agents).stopped is None:  # type: ignore[arg-type]
        pass
    sent_images = [r.images() for r in server.generator_requests()]
    assert len(sent_images) >= 2 and all(len(x) == 1 for x in sent_images)
    assert len({x[0][1] for x in sent_images}) == 1  # the same bytes every time: downscaled once
    img = Image.open(io.BytesIO(base64.b64decode(sent_images[0][0][1])))
    assert img.size == sent  # the largest the limit allows, aspect kept
    calls = [c for c in _calls(engine, exp) if c.purpose == "ask"]
    assert calls and all(c.detail == {"image": {"sent": list(sent), "source": [2400, 2000], "limit": limit}}
                         for c in calls)


def test_a_claude_model_asked_to_think_keeps_its_thinking_apart(server: FakeLLM,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """PXP_THINKING_BUDGET asks a Claude model to think (extended thinking): the request carries the budget, a
    larger max_tokens, the tool offered not forced, no temperature; the reply's thinking blocks stay apart."""
    monkeypatch.setenv("PXP_THINKING_BUDGET", "2048")
    server.handler = lambda req: answer("Pneumonia", EXPLANATION, structured=True)
    server.mode = "anthropic-thinking"
    provider = make_provider("anthropic:claude-sonnet-4-6", ProviderOptions.from_env())
    prompt = Prompt(system="s", turns=[Turn("user", [TextPart("Case 1.")])])
    out = provider.complete(prompt, max_tokens=300, temperature=0.0, schema=SCHEMA)
    body = server.requests[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048} and body["max_tokens"] == 2348
    assert body["tool_choice"] == {"type": "auto"} and "temperature" not in body
    assert out.thinking == THINKING  # kept apart: the answer read is the one after it
    from pxp.tasks.rad import rad_spec

    assert rad_spec().parse(out.text, out.data)[0] == "Pneumonia"
    monkeypatch.setenv("PXP_THINKING_BUDGET", "100")
    with pytest.raises(SettingError, match="PXP_THINKING_BUDGET is '100': allowed is a whole number from 1024"):
        ProviderOptions.from_env()
    monkeypatch.delenv("PXP_THINKING_BUDGET")
    with pytest.raises(LLMConfigError, match="thinking_budget must be at least 1024"):  # a run's own setting
        ProviderOptions.from_env(extra={"thinking_budget": 100})
