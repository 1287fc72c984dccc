"""LLM machine-agents driving real sessions through the engine, with the real anthropic and
openai SDKs talking to a local server that speaks their wire formats (tests/llm_server.py)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator

import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.agents.base import AgentUnavailable
from pxp.agents.llm import LLMMachine
from pxp.analysis.validate import validate
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.engine import interact_session, step
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.factory import AgentConfigError, make_agents
from pxp.storage.store import db_session
from pxp.storage.tables import Context, Dataset, Experiment, LLMCall, Message, Run, Session
from tests.factories import DRUGS, make_drug, make_rad_images
from tests.llm_server import FakeLLM, Reply, Request, adopting_model, answer, checker_reply, serve_both_apis

CLAUDE = "anthropic:claude-sonnet-4-6"
GPT = "openai:gpt-4o"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    yield from serve_both_apis(monkeypatch, retries="2")


def _setup(engine: Engine, dataset: str, machine: str, checker: str, *, keys: list[str] | None = None,
           **cfg: object) -> tuple[Experiment, Run, list[Session]]:
    """An experiment on the instances with the given keys; its run and sessions."""
    split = None
    if keys is not None:
        with db_session(engine) as db:
            from pxp.storage.tables import Instance

            for i in db.exec(select(Instance)).all():
                i.split = "chosen" if i.key in keys else "other"
                db.add(i)
        split = "chosen"
    exp = create_experiment(engine, RunConfig(dataset=dataset, machine=machine, checker=checker,
                                              split=split, test_split=None, val_split=None, **cfg))  # type: ignore[arg-type]
    with db_session(engine) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
        sessions = list(db.exec(select(Session).where(Session.run_id == run.id).order_by(col(Session.ordinal))).all())
    return exp, run, sessions


def _messages(engine: Engine, session_id: int) -> list[Message]:
    with db_session(engine) as db:
        return list(db.exec(select(Message).where(Message.session_id == session_id).order_by(col(Message.j))).all())


def _calls(engine: Engine, session_id: int | None = None) -> list[LLMCall]:
    with db_session(engine) as db:
        q = select(LLMCall).order_by(col(LLMCall.id))
        if session_id is not None:
            q = q.where(LLMCall.session_id == session_id)
        return list(db.exec(q).all())


def _wrong_first(prediction: str, explanation: str):  # type: ignore[no-untyped-def]
    return lambda req: answer(prediction, explanation)


# --- RAD ------------------------------------------------------------------------------------


def test_rad_session_with_image_anthropic(engine: Engine, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(2400, 2000))
    server.handler = adopting_model(_wrong_first("Atelectasis", "volume loss of the right lower lobe with shift"))
    exp, run, sessions = _setup(engine, "rad-img", CLAUDE, "anthropic:claude-haiku-4-5", keys=["img_pneumonia_0"])
    agents = make_agents(engine, exp, run)
    assert isinstance(agents[Sender.MACHINE], LLMMachine)
    s = sessions[0]
    results = interact_session(engine, s.id or 0, agents)
    msgs = _messages(engine, s.id or 0)
    assert [m.tag for m in msgs] == ["INIT", "REFUTE", "REVISE", "RATIFY", "RATIFY"]
    assert results[-1].stopped == "ratified"
    assert msgs[0].prediction == "Atelectasis" and msgs[2].prediction == "Pneumonia"

    gen = server.generator_requests()
    assert len(gen) == 3  # messages 1, 3 and 5
    first = gen[0]
    # the image arrives base64 and downscaled to Claude's long edge of 1568 px
    (mime, data), = first.images()
    img = Image.open(io.BytesIO(base64.b64decode(data)))
    assert mime == "image/png" and max(img.size) <= 1568 and img.size[0] > img.size[1]
    # forced tool use with the labels as an enum; paper's generator max tokens for RAD
    assert first.body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert first.body["tools"][0]["input_schema"]["properties"]["prediction"]["enum"][1] == "Pneumonia"
    assert first.body["max_tokens"] == 300
    assert "temperature" not in first.body
    # cache_control on the stable prefix: the system prompt and the instance's image block
    assert first.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert first.body["messages"][0]["content"][-1]["type"] == "image"
    assert first.body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # the machine never sees the reference answer of the case it is working on
    reference = msgs[1].explanation
    assert reference not in " ".join(first.texts()) and reference not in first.system()
    # message 3's prompt: the human's REFUTE phrased by tag, with what is disputed
    third = gen[1]
    last = third.last_user_text()
    assert "refutes your answer" in last and "Both the prediction and the explanation are disputed" in last
    assert "Prediction: Pneumonia" in last and reference in last
    assert [m["role"] for m in third.body["messages"]] == ["user", "assistant", "user"]
    assert third.body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # the checker: temperature 0, 10 tokens, strictly Yes/No
    chk = server.checker_requests()
    assert chk and all(r.body["temperature"] == 0.0 and r.body["max_tokens"] == 10 for r in chk)
    assert all(r.body["model"] == "claude-haiku-4-5" for r in chk)

    # accounting: every call is a row, with tokens and a cost for a priced model
    calls = _calls(engine, s.id)
    assert len(calls) == len(server.requests)
    assert {c.purpose for c in calls} == {"ask", "agree"}
    assert all(c.tokens_in == 100 and c.tokens_out == 20 and c.error is None for c in calls)
    assert all(c.cost_usd is not None and c.cost_usd > 0 for c in calls)
    # the C table holds the assembled prompt, the image by sha256 and never its bytes
    with db_session(engine) as db:
        ctx = db.exec(select(Context).where(Context.session_id == s.id, Context.j == 1)).one()
    part = ctx.content["prompt"]["turns"][0]["parts"][-1]
    assert part["type"] == "image" and len(part["sha256"]) == 64 and max(part["width"], part["height"]) <= 1568
    assert data[:200] not in str(ctx.content)
    assert validate(engine) == (len(sessions), [])


def test_carried_context_is_a_cached_prefix(engine: Engine, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(800, 600), labels=["Pneumonia", "Cardiomegaly"])
    server.handler = adopting_model(_wrong_first("Cardiomegaly", "enlarged cardiac silhouette"))
    exp, run, sessions = _setup(engine, "rad-img", CLAUDE, CLAUDE)
    agents = make_agents(engine, exp, run)
    from pxp.agents.base import CarriedSession
    from pxp.running.pxp.engine import instance_view
    from pxp.storage.store import session_msgs

    interact_session(engine, sessions[0].id or 0, agents)
    with db_session(engine) as db:  # the runner's LEARN decides what is kept; here: carry session 1
        msgs = tuple(session_msgs(db, session_id=sessions[0].id or 0))
    carry = [CarriedSession(sessions[0].id or 0, instance_view(engine, sessions[0].instance_id), msgs)]
    n0 = len(server.requests)
    interact_session(engine, sessions[1].id or 0, agents, carry=carry)
    req = next(r for r in server.requests[n0:] if not r.is_checker)
    blocks = req.body["messages"][0]["content"]
    assert blocks[0]["text"].startswith("Use the following as context")
    assert "Earlier case 1" in blocks[1]["text"] and blocks[1]["cache_control"] == {"type": "ephemeral"}
    assert blocks[-1]["type"] == "image" and blocks[-1]["cache_control"] == {"type": "ephemeral"}
    marks = sum("cache_control" in b for m in req.body["messages"] for b in m["content"])
    assert marks + 1 <= 4  # with the system prompt's: Anthropic's limit of four breakpoints
    # the context snapshot names the carried sessions
    with db_session(engine) as db:
        ctx = db.exec(select(Context).where(Context.session_id == sessions[1].id, Context.j == 1)).one()
    assert ctx.content["carried_sessions"] == [sessions[0].id]
    # the carried session is stored by reference (its messages are in the M table), not repeated
    assert ctx.content["prompt"]["turns"][0]["parts"][1] == {"type": "ref", "carried_session": sessions[0].id}


def test_rad_session_openai_image_downscaled_and_json_schema(engine: Engine, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(3000, 1000))
    server.handler = adopting_model(_wrong_first("Pneumonia", "patchy airspace consolidation in the left lower zone"))
    exp, run, sessions = _setup(engine, "rad-img", GPT, GPT, keys=["img_pneumonia_0"])
    interact_session(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    first = server.generator_requests()[0]
    assert first.path == "/v1/chat/completions"
    (mime, data), = first.images()
    img = Image.open(io.BytesIO(base64.b64decode(data)))
    assert mime == "image/png" and min(img.size) <= 768 and max(img.size) <= 2048
    rf = first.body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert first.body["max_tokens"] == 300  # a base URL: an OpenAI-compatible server
    assert validate(engine) == (1, [])
    calls = _calls(engine, sessions[0].id)
    assert calls and all(c.cost_usd is None for c in calls)  # a local server has no price


# --- DRUG -----------------------------------------------------------------------------------


def _drug_first(req: Request) -> Reply:
    # an invalid SMILES first (unclosed ring), then the right reactants written differently
    if not any("could not be used" in t for t in req.texts()):
        return answer("CC(=O)Nc1ccc(O)cc", "Acetylation.")
    return answer("Nc1ccc(O)cc1.CC(=O)OC(C)=O",
                  "Acetylation of the amine of 4-aminophenol with acetic anhydride gives the acetanilide.")


@pytest.mark.parametrize("machine", [CLAUDE, GPT])
def test_drug_session_invalid_smiles_is_reasked(engine: Engine, server: FakeLLM, machine: str) -> None:
    make_drug(engine, "drug")
    with db_session(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == "drug")).one()
        ds.config = {"few_shot": [{"target": "NNc1ccc(Br)nc1", "reactants": "Fc1ccc(Br)nc1.NN",
                                   "explanation": "SNAr of the fluoropyridine by hydrazine."}]}
        db.add(ds)
    server.handler = adopting_model(_drug_first)
    exp, run, sessions = _setup(engine, "drug", machine, machine, keys=["drug_1"])
    interact_session(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    msgs = _messages(engine, sessions[0].id or 0)
    # the set of canonical SMILES matches the reference although written in another order
    assert [m.tag for m in msgs] == ["INIT", "RATIFY", "RATIFY"]
    assert msgs[0].prediction == "Nc1ccc(O)cc1.CC(=O)OC(C)=O"
    gen = server.generator_requests()
    assert len(gen) == 3  # invalid, re-asked, then message 3
    correction = gen[1].last_user_text()
    assert "not a valid SMILES" in correction and "Pathway:" in correction
    assert "Fc1ccc(Br)nc1.NN" in gen[0].system() and DRUGS[0][0] in " ".join(gen[0].texts())
    assert gen[0].max_tokens == 1024
    asks = [c for c in _calls(engine, sessions[0].id) if c.purpose == "ask"]
    assert [(c.attempt, c.error is not None) for c in asks[:2]] == [(1, True), (2, False)]
    assert "format:" in (asks[0].error or "")
    with db_session(engine) as db:
        ctx = db.exec(select(Context).where(Context.session_id == sessions[0].id, Context.j == 1)).one()
    assert ctx.content["attempts"] == 2
    assert validate(engine) == (1, [])


def test_text_fallback_parsing_without_structured_output(engine: Engine, server: FakeLLM) -> None:
    make_drug(engine, "drug")

    def first(req: Request) -> Reply:
        assert "tools" not in req.body  # structured output switched off
        return Reply(text="**Pathway:** `Nc1ccc(O)cc1.CC(=O)OC(C)=O`\n\n**Explanation:**\nAcetylation of the amine\n"
                          "of 4-aminophenol with acetic anhydride gives the acetanilide.")

    server.handler = adopting_model(first)
    exp, run, sessions = _setup(engine, "drug", CLAUDE, "lexical", keys=["drug_1"], extra={"structured": False})
    interact_session(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    m1 = _messages(engine, sessions[0].id or 0)[0]
    assert m1.prediction == "Nc1ccc(O)cc1.CC(=O)OC(C)=O"
    assert m1.explanation == ("Acetylation of the amine\nof 4-aminophenol with acetic anhydride gives the "
                              "acetanilide.")
    assert not server.checker_requests()  # lexical AGREE: no checker calls


# --- failures -------------------------------------------------------------------------------


def test_429_then_success_is_retried_by_the_sdk(engine: Engine, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    good = adopting_model(lambda req: answer("CC(=O)Oc1ccccc1C(=O)O.O", "An ester."))
    seen: list[int] = []

    def handler(req: Request) -> Reply:
        seen.append(1)
        if len(seen) == 1:
            return Reply(status=429, error="rate limited")
        return good(req)

    server.handler = handler
    exp, run, sessions = _setup(engine, "drug", GPT, "lexical", keys=["drug_2"])
    r = step(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    assert r.message.j == 1
    assert len(server.requests) >= 2 and server.requests[1].headers.get("x-stainless-retry-count") == "1"
    calls = _calls(engine, sessions[0].id)
    assert calls[0].error is None  # one call of ours; the SDK retried inside it


@pytest.mark.parametrize("machine", [CLAUDE, GPT])
def test_persistent_500_leaves_the_session_resumable(engine: Engine, server: FakeLLM, machine: str) -> None:
    make_drug(engine, "drug")
    server.handler = lambda req: Reply(status=500, error="upstream exploded")
    exp, run, sessions = _setup(engine, "drug", machine, "lexical", keys=["drug_1"])
    agents = make_agents(engine, exp, run)
    sid = sessions[0].id or 0
    with pytest.raises(AgentUnavailable) as e:
        step(engine, sid, agents)
    msg = str(e.value)
    assert "API error 500" in msg and "upstream exploded" in msg and "after 2 retries" in msg
    assert "\n" not in msg and "sk-test" not in msg
    assert len(server.requests) == 3  # the SDK's own retries, no loop of ours around them
    # nothing written, nothing aborted; the failed call is accounted
    assert _messages(engine, sid) == []
    with db_session(engine) as db:
        assert (db.get(Session, sid) or Session()).status == "open"
    (call,) = _calls(engine, sid)
    assert call.error is not None and "500" in call.error
    assert validate(engine) == (1, [])
    # the server recovers: the same session goes on from where it stopped
    server.handler = adopting_model(_drug_first)
    interact_session(engine, sid, agents)
    assert [m.tag for m in _messages(engine, sid)] == ["INIT", "RATIFY", "RATIFY"]
    assert validate(engine) == (1, [])


def test_garbage_answers_abort_after_five_attempts(engine: Engine, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(64, 64), labels=["Pneumonia", "Cardiomegaly"])
    server.handler = lambda req: Reply(text="I am unable to interpret medical images.")
    exp, run, sessions = _setup(engine, "rad-img", CLAUDE, CLAUDE, keys=["img_pneumonia_0"])
    sid = sessions[0].id or 0
    r = step(engine, sid, make_agents(engine, exp, run))
    assert r.aborted is not None and "5 attempts" in r.aborted
    with db_session(engine) as db:
        row = db.get(Session, sid)
        assert row is not None and row.status == "aborted" and "5 attempts" in (row.abort_reason or "")
    assert len(server.requests) == 5
    calls = _calls(engine, sid)
    assert [c.attempt for c in calls] == [1, 2, 3, 4, 5] and all(c.error for c in calls)
    # each re-ask carries the short correction
    assert "could not be used" in server.requests[4].last_user_text()
    assert _messages(engine, sid) == []
    assert validate(engine) == (1, [])


def test_label_outside_the_dataset_is_reasked(engine: Engine, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(64, 64), labels=["Pneumonia", "Cardiomegaly"])
    replies = iter([answer("Lung cancer", "a mass"), answer("pneumonia.", "patchy consolidation")])
    server.handler = lambda req: checker_reply(req) if req.is_checker else next(replies)
    exp, run, sessions = _setup(engine, "rad-img", CLAUDE, CLAUDE, keys=["img_pneumonia_0"])
    step(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    (m1,) = _messages(engine, sessions[0].id or 0)
    assert m1.prediction == "Pneumonia"  # normalised to the dataset's label
    assert "must be exactly one of: Pneumonia, Cardiomegaly" in server.requests[1].last_user_text()


def test_checker_answer_is_parsed_strictly(engine: Engine, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    verdicts = iter(["Yes, they are consistent.", "**No.**"])

    def handler(req: Request) -> Reply:
        if req.is_checker:
            return Reply(text=next(verdicts))
        return answer("CC(=O)OC(C)=O.Nc1ccc(O)cc1", "Some other explanation entirely different words.")

    server.handler = handler
    exp, run, sessions = _setup(engine, "drug", CLAUDE, CLAUDE, keys=["drug_1"])
    agents = make_agents(engine, exp, run)
    step(engine, sessions[0].id or 0, agents)
    step(engine, sessions[0].id or 0, agents)
    m2 = _messages(engine, sessions[0].id or 0)[1]
    assert m2.agree is False and m2.match is True and m2.tag == "REFUTE"
    chk = server.checker_requests()
    assert len(chk) == 2 and "exactly Yes or No" in chk[1].last_user_text()


def test_missing_key_is_a_config_error(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("ANTHROPIC_PROFILE", raising=False)
    make_drug(engine, "drug")
    exp, run, _ = _setup(engine, "drug", CLAUDE, "lexical")
    with pytest.raises(AgentConfigError, match="ANTHROPIC_API_KEY"):
        make_agents(engine, exp, run)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with db_session(engine) as db:
        e = db.get(Experiment, exp.id)
        assert e is not None
        e.config = {**e.config, "machine": "mistral:large"}
        db.add(e)
        exp2 = e
    with pytest.raises(AgentConfigError, match="not available"):
        make_agents(engine, exp2, run)


def test_rad_instance_without_image_stops_the_step(engine: Engine, server: FakeLLM) -> None:
    from tests.factories import make_rad

    make_rad(engine, "rad-noimg", per_label=1)
    server.handler = adopting_model(_wrong_first("Pneumonia", "x"))
    exp, run, sessions = _setup(engine, "rad-noimg", CLAUDE, "lexical", keys=["pneumonia_0"])
    with pytest.raises(AgentUnavailable, match="has no image"):
        step(engine, sessions[0].id or 0, make_agents(engine, exp, run))
    assert not server.requests and _messages(engine, sessions[0].id or 0) == []
