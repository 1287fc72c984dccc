"""The cost estimate before a run (docs/research.md, Cost estimate): hand-checked arithmetic, and the calls a run then
makes."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Engine, func, select

from pxp.analysis.calls import call_totals
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.estimate import (
    PROBES,
    Assumptions,
    DatasetFacts,
    dataset_facts,
    estimate,
    session_messages,
    store_estimate,
)
from pxp.running.pxp.controlled.estimate_text import versus_actual
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session
from pxp.storage.tables import Experiment, Message, Probe, Run, Session
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
    """The estimate checked against a real run, with the simulated machine and the lexical AGREE (no paid call).

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


# --- the evaluation schedule and the carry policy (docs/research.md, Evaluation schedules) ----------------------------


def test_the_schedule_by_hand() -> None:
    """S = 10, --eval-every 4: checkpoints 4, 8 and 10 on a sample of 3 of the 7 test cases;
    LEARN on a sample of 2 of the 5 validation cases, once before the first decision and after each session."""
    facts = DatasetFacts(interact=10, val=5, test=7)
    cfg = RunConfig(dataset="d", n=4, learn=True, eval_every=4, eval_sample=3, learn_sample=2, eval_at_start=True)
    rows = {r.what: r for r in estimate(cfg, facts, Assumptions(reach_n=1.0)).rows}
    assert rows["test evaluations"].calls == 3 * (1 + 3)
    assert rows["LEARN validation"].calls == 2 * (1 + 10)
    # a sample larger than the split is the split; LEARN dropping half the sessions: a checkpoint
    # 4 sessions after the previous one is evaluated unless all 4 were dropped (1 - 0.5^4), the last 2 after (1 - 0.5^2)
    big = RunConfig(dataset="d", n=4, learn=True, eval_every=4, eval_sample=70)
    rows = {r.what: r for r in estimate(big, facts, Assumptions(reach_n=1.0, keep_share=0.5)).rows}
    assert rows["test evaluations"].calls == pytest.approx(7 * (2 * (1 - 0.5**4) + (1 - 0.5**2)))
    assert rows["LEARN validation"].calls == 5 * 11


def test_the_carry_policy_bounds_the_carried_tokens() -> None:
    """The tiny run of test_a_tiny_llm_run_by_hand, three sessions: a carried session is 210 tokens in a prompt
    and 2 × (100 + 12) = 224 as select_carry counts it."""
    facts = DatasetFacts(interact=3, val=0, test=1, system_chars=400, instance_chars=0, short_chars=0,
                         answer_chars=400, explanation_chars=300)
    a = Assumptions(reach_n=0.0, phrasing_tokens=0)

    def tokens_in(carry: str) -> tuple[float, float]:
        rows = {r.what: r for r in estimate(RunConfig(dataset="d", machine="anthropic:claude-sonnet-4-6", n=2,
                                                      learn=False, carry=carry), facts, a).rows}
        return rows["session messages"].tokens_in, rows["test evaluations"].tokens_in

    # all: sessions carry 0, 1, 2; evaluations 1, 2, 3
    assert tokens_in("all") == (3 * 100 + 210 * (0 + 1 + 2), 3 * 100 + 210 * (1 + 2 + 3))
    assert tokens_in("last:1") == (3 * 100 + 210 * (0 + 1 + 1), 3 * 100 + 210 * 3)
    assert tokens_in("tokens:500") == tokens_in("last:2")  # two sessions of 224 fit 500 tokens
    assert tokens_in("tokens:100") == (300, 300)  # not one fits
    est = estimate(RunConfig(dataset="d", machine="anthropic:claude-sonnet-4-6", n=2, carry="last:1"), facts, a)
    assert any("the last 1 kept sessions are carried" in x for x in est.assumptions)
    assert "carried context (not the paper's): --carry last:1" in est.assumptions


def test_the_assumptions_name_a_schedule_that_is_not_the_papers() -> None:
    facts = DatasetFacts(interact=10, val=5, test=7)
    paper = estimate(RunConfig(dataset="d", learn=True), facts)
    assert not any("not the paper's" in x for x in paper.assumptions)
    sched = estimate(RunConfig(dataset="d", learn=True, eval_every=25, eval_sample=50, learn_sample=5), facts)
    assert ("schedule (not the paper's): machine performance after every 25th session and after the last "
            "on a seeded sample of 50 test cases") in sched.assumptions
    assert "schedule (not the paper's): LEARN validates on a seeded sample of 5 val cases" in sched.assumptions


@pytest.mark.parametrize(("learn", "every", "sample", "learn_sample", "carry"),
                         [(False, 2, 2, None, "all"), (True, 3, 2, 2, "last:1"), (True, 5, None, 1, "tokens:300")])
def test_the_estimate_of_a_scheduled_run_matches_its_calls(
    engine: Engine, learn: bool, every: int, sample: int | None, learn_sample: int | None, carry: str
) -> None:
    """The simulated machine with mislead 0 keeps every session, so the evaluation calls are exact under
    any schedule: the test sample at every m-th session and the last, LEARN's sample 1 + S times."""
    make_rad(engine, per_label=4)
    cfg = RunConfig(dataset="toy-rad", split="train", reps=2, n=10, k=3, seed=4, learn=learn, eval_every=every,
                    eval_sample=sample, learn_sample=learn_sample, carry=carry,
                    simulated={"accuracy": 0.6, "adopt": 0.7})
    facts = dataset_facts(engine, cfg)
    est = estimate(cfg, facts)
    exp = create_experiment(engine, cfg)
    run_experiment(engine, exp.id or 0)
    actual = _calls(engine, exp.id or 0)
    S, R = facts.interact, cfg.reps
    T, V = min(sample or facts.test, facts.test), min(learn_sample or facts.val, facts.val)
    expected = R * (T * math.ceil(S / every) + (V * (1 + S) if learn else 0))
    assert est.as_json()["by_purpose"]["eval"]["calls"] == actual["eval"] == expected
    assert abs(est.calls - sum(actual.values())) <= 0.15 * sum(actual.values())


# --- the common-ground probe (docs/research.md, Common-ground probe; `--probe`) ---------------------------------------


def test_probe_calls_by_hand() -> None:
    """n = 2: one human message per session, three questions after it; the probe's prompt is the session so far
    (two messages of 100 tokens) on top of the system prompt (100) and the aside, with no carried context."""
    facts = DatasetFacts(interact=2, val=0, test=1, system_chars=400, instance_chars=0, short_chars=0,
                         answer_chars=400, explanation_chars=300)
    cfg = RunConfig(dataset="d", machine="anthropic:claude-sonnet-4-6", n=2, k=1, reps=2, learn=False, probe=True)
    a = Assumptions(reach_n=0.0, phrasing_tokens=0)
    est = estimate(cfg, facts, a)
    rows = {r.what: r for r in est.rows}
    probe = rows[PROBES]
    assert probe.purpose == "probe" and probe.calls == 2 * 3 and probe.tokens_out == 6 * a.probe_out_tokens
    aside = probe.tokens_in / 6 - (100 + 200)
    assert 40 < aside < 120  # the aside instruction and one question, about 75 tokens
    assert probe.usd == pytest.approx((probe.tokens_in * 3 + probe.tokens_out * 15) / 1e6)
    without = estimate(RunConfig(dataset="d", machine="anthropic:claude-sonnet-4-6", n=2, k=1, reps=2,
                                 learn=False), facts, a)
    assert PROBES not in {r.what for r in without.rows}
    assert est.calls == without.calls + 2 * 6 and est.as_json()["by_purpose"]["probe"]["calls"] == 12
    assert any(x.startswith("--probe: 3 private questions after each human message") for x in est.assumptions)
    assert not any(x.startswith("--probe") for x in without.assumptions)
    # a re-asked reply counts as a call of its own
    assert {r.what: r for r in estimate(cfg, facts, Assumptions(reach_n=0.0, probe_attempts=1.5)).rows}[
        PROBES].calls == 2 * 3 * 1.5


@pytest.mark.parametrize("learn", [False, True])
def test_the_estimated_probe_calls_equal_the_stored_ones(any_engine: Engine, learn: bool) -> None:
    """n = 3: every session is machine, human, machine (a ratify or a reject ends it at 3 at the latest), so one
    human message and three probes per session, as the estimate counts; the simulated machine answers each
    probe with one call (an LLMCall with purpose "probe") and one `probe` row."""
    engine = any_engine
    make_rad(engine, per_label=4)
    cfg = RunConfig(dataset="toy-rad", split="train", reps=2, n=3, k=2, seed=4, learn=learn, probe=True,
                    simulated={"accuracy": 0.6, "adopt": 0.7})
    facts = dataset_facts(engine, cfg)
    est = estimate(cfg, facts)
    exp = create_experiment(engine, cfg)
    store_estimate(engine, exp.id or 0, est)
    run_experiment(engine, exp.id or 0)
    actual = _calls(engine, exp.id or 0)
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(Probe).join(Session).join(Run)
                              .where(Run.experiment_id == exp.id)).scalar_one()
    assert est.as_json()["by_purpose"]["probe"]["calls"] == actual["probe"] == stored == cfg.reps * facts.interact * 3
    versus = {r["purpose"]: r for r in versus_actual(est.as_json(), call_totals(engine, exp.id or 0))}
    assert versus["probe"]["calls_estimated"] == versus["probe"]["calls_actual"] == stored
    assert versus["all"]["calls_actual"] == sum(actual.values())


def test_longer_sessions_are_probed_after_every_human_message(engine: Engine) -> None:
    """n = 10: how sessions end is the estimate's assumption, the rule it counts with is not: the stored probe
    calls are three per stored human message."""
    make_rad(engine, per_label=4)
    cfg = RunConfig(dataset="toy-rad", split="train", n=10, k=3, seed=4, learn=False, probe=True,
                    simulated={"accuracy": 0.6, "adopt": 0.7})
    exp = create_experiment(engine, cfg)
    run_experiment(engine, exp.id or 0)
    with engine.connect() as conn:
        human = conn.execute(select(func.count()).select_from(Message).join(Session).join(Run)
                             .where(Run.experiment_id == exp.id, Message.sender == "human")).scalar_one()
    sessions = dataset_facts(engine, cfg).interact
    assert human > sessions  # some sessions had two human messages or more
    assert _calls(engine, exp.id or 0)["probe"] == 3 * human
