"""The LLM machine's common-ground probe through the real SDKs and a local server (tests/llm_server.py):
private ASIDE questions after each human message, re-asked when unparsable, accounted, never in the dialogue."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.agents.llm import PROBE_MAX_TOKENS
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.storage.store import db_session
from pxp.storage.tables import Context, Probe
from tests.factories import make_rad_images
from tests.llm_server import FakeLLM, Reply, Request, adopting_model
from tests.running.test_llm_sessions import CLAUDE, GPT, _calls, _messages, _setup, _wrong_first, server  # noqa: F401


def _prober(req: Request) -> Reply | None:
    """Probe replies: an invalid first try for the prediction question, never valid for the proposal one."""
    if req.max_tokens != PROBE_MAX_TOKENS:
        return None
    text = req.last_user_text()
    assert "ASIDE: yes or ASIDE: no" in text
    if "proposed a prediction different" in text:
        return Reply(text="Maybe, hard to say.")
    if "accept your current prediction" in text and "ME:  Does" in text:  # attempt 1 (two spaces)
        return Reply(text="Yes, I believe so")
    return Reply(text="ASIDE: yes")


def test_llm_probes_are_private_accounted_and_stored(engine: Engine, server: FakeLLM) -> None:  # noqa: F811
    make_rad_images(engine, "rad-img", size=(800, 600))
    base = adopting_model(_wrong_first("Atelectasis", "volume loss of the right lower lobe with shift"))
    server.handler = lambda req: _prober(req) or base(req)
    exp, _, sessions = _setup(engine, "rad-img", CLAUDE, "anthropic:claude-haiku-4-5", keys=["img_pneumonia_0"],
                              probe=True)
    assert run_experiment(engine, exp.id or 0).status == "finished"
    sid = sessions[0].id or 0
    msgs = _messages(engine, sid)
    # the same session as without probes (tests/running/test_llm_sessions.py's first test)
    assert [m.tag for m in msgs] == ["INIT", "REFUTE", "REVISE", "RATIFY", "RATIFY"]
    with db_session(engine) as db:
        probes = db.exec(select(Probe).where(Probe.session_id == sid).order_by(col(Probe.j), col(Probe.question))).all()
        contexts = db.exec(select(Context).where(Context.session_id == sid)).all()
    got = [(p.j, p.question, p.truth, p.answer, p.valid) for p in probes]
    assert got == [
        (2, "accept_explanation", False, True, True),
        (2, "accept_prediction", False, True, True),
        (2, "proposed_other", True, None, False),
        (4, "accept_explanation", True, True, True),
        (4, "accept_prediction", True, True, True),
        (4, "proposed_other", False, None, False),
    ]
    calls = [c for c in _calls(engine, sid) if c.purpose == "probe"]
    assert len(calls) == 2 * (2 + 1 + 5)  # per human message: 2 tries, 1, and 5 invalid ones
    assert sum(c.error is not None for c in calls) == 2 * (1 + 5)
    assert all(c.tokens_in == 100 and c.cost_usd is not None for c in calls)
    probe_reqs = [r for r in server.requests if r.max_tokens == PROBE_MAX_TOKENS]
    assert len(probe_reqs) == len(calls)
    assert all("tools" not in r.body for r in probe_reqs)  # a free-text reply, not the answer tool
    # private: no probe ever reaches the dialogue or the stored context
    asks = [r for r in server.generator_requests() if r.max_tokens != PROBE_MAX_TOKENS]
    assert len(asks) == 3 and not any("ASIDE" in t for r in asks for t in r.texts())
    assert not any("ASIDE" in str(c.content) for c in contexts)
    # the probe sees the dialogue so far, the human's message last
    after4 = [r for r in probe_reqs if "ratifies your answer" in r.last_user_text()]
    assert after4 and [m["role"] for m in after4[0].body["messages"]] == ["user", "assistant", "user", "assistant",
                                                                            "user"]


def test_openai_probe(engine: Engine, server: FakeLLM) -> None:  # noqa: F811
    make_rad_images(engine, "rad-img", size=(800, 600))
    base = adopting_model(_wrong_first("Pneumonia", "patchy airspace consolidation in the left lower zone"))
    server.handler = lambda req: (Reply(text="ASIDE: no") if req.max_tokens == PROBE_MAX_TOKENS else base(req))
    exp, _, sessions = _setup(engine, "rad-img", GPT, GPT, keys=["img_pneumonia_0"], probe=True)
    assert run_experiment(engine, exp.id or 0).status == "finished"
    with db_session(engine) as db:
        probes = db.exec(select(Probe).where(Probe.session_id == sessions[0].id)).all()
    assert probes and all(p.valid and p.answer is False for p in probes)
