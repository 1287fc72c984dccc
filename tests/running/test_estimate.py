"""The cost estimate before a run (issue 14 §1): hand-checked arithmetic, and the calls a run then makes."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Engine

from pxp.analysis.calls import call_totals
from pxp.running.config import RunConfig
from pxp.running.estimate import Assumptions, DatasetFacts, dataset_facts, estimate, session_messages, store_estimate
from pxp.running.experiments import create_experiment
from pxp.running.runner import run_experiment
from pxp.storage.store import db_session
from pxp.storage.tables import Experiment
from tests.factories import make_rad


def test_a_tiny_llm_run_by_hand() -> None:
    # n = 2: every session is one machine and one human message; 400 characters = 100 tokens
    facts = DatasetFacts(interact=2, val=0, test=1, system_chars=400, instance_chars=0, short_chars=0,
                         answer_chars=400, explanation_chars=300)
    cfg = RunConfig(dataset="d", machine="anthropic:claude-sonnet-4-6", n=2, k=1, reps=2, learn=False)
    est = estimate(cfg, facts, Assumptions(reach_n=0.0, phrasing_tokens=0))
    # a carried session: 0 (case) + 10 (header) + 2 messages × 100 = 210 tokens; the prompt 100 + 210 × carried
    # session 1: ask 100 in; test eval with 1 carried: 310 in. session 2: ask 310; eval with 2 carried: 520.
    assert [(r.what, r.calls, r.tokens_in, r.tokens_out) for r in est.rows] == [
        ("session messages", 2, 100 + 310, 200), ("test evaluations", 2, 310 + 520, 200)]
    assert (est.calls, est.tokens_in, est.tokens_out) == (8, 2 * 1240, 2 * 400)
    # claude-sonnet-4-6: $3 in, $15 out per million tokens
    assert est.usd == pytest.approx(2 * (1240 * 3 + 400 * 15) / 1e6)
    js = est.as_json()
    assert set(js) >= {"calls", "tokens_in", "tokens_out", "usd", "assumptions"}
    assert js["per_repetition"]["calls"] == 4 and js["by_purpose"] == {
        "ask": {"calls": 4, "tokens_in": 820, "tokens_out": 400},
        "eval": {"calls": 4, "tokens_in": 1660, "tokens_out": 400}}
    assert any("characters per token" in a for a in js["assumptions"])


def test_checker_calls_learn_and_unknown_prices() -> None:
    facts = DatasetFacts(interact=3, val=2, test=4, checker="openai:gpt-4.1-mini")
    cfg = RunConfig(dataset="d", machine="openai:my-local-model", n=4, k=3, learn=True, eval_at_start=True)
    est = estimate(cfg, facts, Assumptions(reach_n=1.0))
    rows = {r.what: r for r in est.rows}
    # n = 4 for every session: 2 machine messages, 2 human ones, each checked once
    assert rows["session messages"].calls == 3 * 2 and rows["session checks"].calls == 3 * 2
    # LEARN: the validation split before the first decision, then after each session; ask + check per instance
    assert rows["LEARN validation"].calls == 2 * (2 * (1 + 3))
    # the test split at the start and after each (kept) session
    assert rows["test evaluations"].calls == 2 * (4 * (1 + 3))
    assert rows["session checks"].usd is not None and rows["session messages"].usd is None
    assert est.usd is None and est.as_json()["usd"] is None
    assert any("no price is known for openai:my-local-model" in a for a in est.assumptions)


def test_session_lengths() -> None:
    assert session_messages(10, Assumptions(reach_n=1.0)) == [(1.0, 5, 5)]
    kinds = session_messages(4, Assumptions(reach_n=0.0, short_lengths=(3, 5)))
    assert kinds == [(0.5, 2, 1), (0.5, 2, 2)]  # 5 is clipped to n = 4


def _calls(engine: Engine, experiment_id: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in call_totals(engine, experiment_id):
        out[row["purpose"]] = out.get(row["purpose"], 0) + row["calls"]
    return out


@pytest.mark.parametrize("learn", [False, True])
def test_the_estimate_of_a_small_run_matches_the_calls_it_makes(any_engine: Engine, learn: bool) -> None:
    """Issue 14's check, with the simulated machine and the lexical AGREE (no paid call).

    How close, and why: the evaluation calls (purpose eval) are exact — the schedule is fixed (the
    test split after every kept session; LEARN's validation split once, then after every session)
    and the simulated machine with mislead 0 never loses validation accuracy, so LEARN keeps every
    session as the estimate assumes. The session messages (purpose ask) depend on how each session
    ends, which is the one assumption here: they must lie between the hard bounds (1 and ceil(n/2)
    machine messages per session), and the total within 10 %.
    """
    engine = any_engine
    make_rad(engine, per_label=4)
    cfg = RunConfig(dataset="toy-rad", split="train", reps=3, n=10, k=3, seed=4, learn=learn, eval_at_start=True,
                    simulated={"accuracy": 0.6, "adopt": 0.7})
    facts = dataset_facts(engine, cfg)
    assert facts.interact > 0 and facts.val > 0 and facts.test > 0 and facts.measured
    est = estimate(cfg, facts)
    exp = create_experiment(engine, cfg)
    store_estimate(engine, exp.id or 0, est)
    run_experiment(engine, exp.id or 0)
    actual = _calls(engine, exp.id or 0)
    by = est.as_json()["by_purpose"]
    S, V, T, R = facts.interact, facts.val, facts.test, cfg.reps
    assert by["eval"]["calls"] == actual["eval"] == R * (T * (1 + S) + (V * (1 + S) if learn else 0))
    assert R * S <= actual["ask"] <= R * S * math.ceil(cfg.n / 2)
    assert abs(est.calls - sum(actual.values())) <= 0.10 * sum(actual.values())
    assert (est.tokens_in, est.tokens_out, est.usd) == (0, 0, 0.0)
    with db_session(engine) as db:
        stored = db.get(Experiment, exp.id)
        assert stored is not None and stored.config["estimate"]["calls"] == est.calls
