"""The evaluation schedule, seeded samples and carried context of a controlled run (docs/research.md, Evaluation
schedules)."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from sqlalchemy import Engine, func
from sqlmodel import Session as DB
from sqlmodel import col, select
from typer.testing import CliRunner

import pxp.cli.main  # noqa: F401  (registers every command group)
from pxp.agents.base import Answer, CarriedSession, InstanceView
from pxp.analysis.report import render, report_json
from pxp.cli.common import app
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.running.pxp.config import RunConfig, RunError, parse_carry, sample_ids
from pxp.running.pxp.controlled.learn import carried_tokens, eval_views, select_carry
from pxp.running.pxp.controlled.repetition import CONTEXT_NOTE, eval_due
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import find_experiment, get_engine
from pxp.storage.tables import Evaluation, Experiment, Instance, LLMCall, Run, Session
from tests.factories import make_text
from tests.running.test_resume import _StopAfter
from tests.running.test_runner import e_table

S = 10  # sessions per repetition (the train split)


@pytest.fixture
def data(engine: Engine) -> Engine:
    make_text(engine, per_split=S)  # train, val and test of S instances each
    return engine


def _cfg(**kw: Any) -> RunConfig:
    base: dict[str, Any] = {"dataset": "toy-text", "split": "train", "reps": 2, "seed": 3, "learn": False,
                            "simulated": {"accuracy": 0.5, "adopt": 0.5}}
    return RunConfig(**{**base, **kw})


def _run(engine: Engine, cfg: RunConfig, name: str) -> Experiment:
    exp = create_experiment(engine, cfg, name=name)
    assert run_experiment(engine, exp.id or 0).status == "finished"
    return exp


def _eval_calls(engine: Engine, exp: Experiment) -> int:
    with DB(engine) as db:
        return int(db.exec(select(func.count()).select_from(LLMCall).where(
            LLMCall.experiment_id == exp.id, LLMCall.purpose == "eval")).one())


def _evals(engine: Engine, exp: Experiment, split: str) -> dict[int, list[tuple[int, int]]]:
    """repetition -> [(after_session, instances)] of the evaluations on `split`."""
    out: dict[int, list[tuple[int, int]]] = {}
    with DB(engine) as db:
        for rep, after, n in db.exec(
            select(Run.repetition, Evaluation.after_session, Evaluation.instances)
            .join(Run, col(Run.id) == col(Evaluation.run_id))
            .where(Run.experiment_id == exp.id, Evaluation.split == split)
            .order_by(col(Run.repetition), col(Evaluation.after_session))
        ).all():
            out.setdefault(rep, []).append((after, n))
    return out


# --- the schedule --------------------------------------------------------------------------------


def test_eval_due_every_mth_session_and_the_last() -> None:
    assert [o for o in range(1, 11) if eval_due(o, 10, 4)] == [4, 8, 10]
    assert [o for o in range(1, 11) if eval_due(o, 10, 1)] == list(range(1, 11))
    assert [o for o in range(1, 11) if eval_due(o, 10, 25)] == [10]


@pytest.mark.parametrize(("every", "sample"), [(1, None), (3, 4), (4, None), (25, 3)])
def test_evaluation_calls_equal_the_formula(data: Engine, every: int, sample: int | None) -> None:
    """LEARN off: every finished session is kept, so the test set is evaluated at each checkpoint:
    ceil(S / m) evaluations of |sample| calls (one machine answer each) per repetition."""
    cfg = _cfg(eval_every=every, eval_sample=sample)
    exp = _run(data, cfg, "formula")
    with DB(data) as db:
        aborted = db.exec(select(func.count()).select_from(Session).join(Run).where(
            Run.experiment_id == exp.id, Session.status == "aborted")).one()
    assert aborted == 0
    size = sample or S
    assert _eval_calls(data, exp) == cfg.reps * math.ceil(S / every) * size
    points = [o for o in range(1, S + 1) if o % every == 0 or o == S]
    assert _evals(data, exp, "test") == {r: [(o, size) for o in points] for r in (1, 2)}


def test_learn_sample_calls_equal_the_formula(data: Engine) -> None:
    """LEARN: one base evaluation and one trial per finished session, each on the validation sample;
    the test set at the checkpoints where a kept session changed the carried context."""
    cfg = _cfg(learn=True, eval_every=3, eval_sample=2, learn_sample=3, simulated={"accuracy": 0.3, "adopt": 0.5})
    exp = _run(data, cfg, "learn")
    with DB(data) as db:
        rows = db.exec(select(Run.repetition, Session.ordinal, Session.context_kept, Session.status)
                       .join(Run).where(Run.experiment_id == exp.id)).all()
    expected = 0
    for r in (1, 2):
        kept = {o for rep, o, k, st in rows if rep == r and k}
        finished = sum(1 for rep, _, _, st in rows if rep == r and st == "finished")
        expected += (1 + finished) * 3  # LEARN
        due, last = [o for o in range(1, S + 1) if o % 3 == 0 or o == S], 0
        for o in due:
            if any(last < k <= o for k in kept):
                expected += 2
                last = o
    assert _eval_calls(data, exp) == expected
    assert {n for rs in _evals(data, exp, "val").values() for _, n in rs} == {3}


def test_samples_are_seeded_stored_and_the_same_for_every_repetition(data: Engine) -> None:
    exp = create_experiment(data, _cfg(eval_sample=4, learn_sample=3, learn=True), name="sampled")
    resolved = exp.config["resolved"]
    with DB(data) as db:
        test_ids = [i.id for i in db.exec(select(Instance).where(Instance.split == "test")).all()]
    assert resolved["test"]["sample"] == sample_ids([i or 0 for i in test_ids], 4, 3, "test")
    assert len(resolved["test"]["sample"]) == 4 and len(resolved["val"]["sample"]) == 3
    assert set(resolved["test"]["sample"]) <= set(test_ids)
    assert exp.config["eval_sample"] == 4 and exp.config["learn_sample"] == 3
    again = create_experiment(data, _cfg(eval_sample=4, learn_sample=3, learn=True), name="sampled-2")
    other = create_experiment(data, _cfg(eval_sample=4, seed=11), name="other-seed")
    assert again.config["resolved"]["test"]["sample"] == resolved["test"]["sample"]
    assert other.config["resolved"]["test"]["sample"] != resolved["test"]["sample"]
    whole = create_experiment(data, _cfg(eval_sample=S), name="whole")
    assert "sample" not in whole.config["resolved"]["test"]  # a sample as large as the split is the split


def test_the_stored_sample_is_the_one_evaluated(data: Engine) -> None:
    exp = _run(data, _cfg(eval_every=5, eval_sample=3), "stored")
    cfg = RunConfig.from_dict(exp.config)
    sample = exp.config["resolved"]["test"]["sample"]
    assert [v.id for v in eval_views(data, cfg, exp.config, "test")] == sample
    # the stored ids win over the seed (a dataset that grew keeps its sample)
    moved = {**exp.config, "resolved": {**exp.config["resolved"], "test": {"sample": sample[:2]}}}
    assert [v.id for v in eval_views(data, cfg, moved, "test")] == sample[:2]
    assert _eval_calls(data, exp) == 2 * 2 * 3  # 2 repetitions x 2 checkpoints x 3 instances


def test_a_resumed_run_keeps_the_schedule_and_equals_an_uninterrupted_one(engine: Engine, tmp_path: Any) -> None:
    make_text(engine, per_split=S)
    cfg = _cfg(learn=True, eval_every=3, eval_sample=4, learn_sample=5, carry="last:2")
    ref_engine = get_engine(f"sqlite:///{tmp_path / 'ref.db'}")
    make_text(ref_engine, per_split=S)
    ref = _run(ref_engine, cfg, "X")
    exp = create_experiment(engine, cfg, name="X")
    stop = threading.Event()
    out = run_experiment(engine, exp.id or 0, observer=_StopAfter(stop, 15), stop=stop)
    assert out.status == "paused"
    with DB(engine) as db:
        stored = find_experiment(db, name_or_id="X")
    assert stored is not None
    back = RunConfig.from_dict(stored.config)
    assert (back.eval_every, back.eval_sample, back.learn_sample, back.carry) == (3, 4, 5, "last:2")
    assert run_experiment(engine, exp.id or 0).status == "finished"
    assert e_table(engine, exp) == e_table(ref_engine, ref)


# --- carried context -----------------------------------------------------------------------------


def _carried(i: int, words: int) -> CarriedSession:
    x = InstanceView(id=i, key=f"k{i}", task="text", payload="word " * words, label="A",
                     reference=Answer("A", "e"))
    msgs = (Msg(1, Sender.MACHINE, Tag.INIT, "A", "because"), Msg(2, Sender.HUMAN, Tag.RATIFY, "A", "because"))
    return CarriedSession(1000 + i, x, msgs)


def test_carry_policies_pick_the_right_sessions() -> None:
    carry = [_carried(i, 40) for i in range(1, 7)]
    ids = [c.session_id for c in carry]
    assert [c.session_id for c in select_carry(carry, parse_carry("all"))] == ids
    assert [c.session_id for c in select_carry(carry, parse_carry("last:2"))] == ids[-2:]
    assert [c.session_id for c in select_carry(carry, parse_carry("last:10"))] == ids
    each = carried_tokens(carry[0])
    assert each > 40  # the payload (200 characters = 50 tokens) and two messages
    assert [c.session_id for c in select_carry(carry, parse_carry(f"tokens:{3 * each + 1}"))] == ids[-3:]
    assert [c.session_id for c in select_carry(carry, parse_carry(f"tokens:{each - 1}"))] == []
    big = [*carry[:5], _carried(9, 4000)]  # the latest is too big: nothing older is carried past it
    assert select_carry(big, parse_carry(f"tokens:{3 * each}")) == []


@pytest.mark.parametrize("bad", ["", "some", "last", "last:0", "tokens:-3", "tokens:x", "all:2"])
def test_bad_carry_policies_are_one_line(bad: str) -> None:
    with pytest.raises(RunError, match="--carry must be all, last:M or tokens:T"):
        parse_carry(bad)
    assert _cfg(carry=bad).schedule_errors()


def test_bad_schedules_are_refused_before_anything_is_stored(data: Engine) -> None:
    for kw, msg in (({"eval_every": 0}, "--eval-every"), ({"eval_sample": 0}, "--eval-sample"),
                    ({"learn_sample": -1}, "--learn-sample"), ({"carry": "most"}, "--carry")):
        with pytest.raises(RunError, match=msg):
            create_experiment(data, _cfg(**kw), name="bad")
    with DB(data) as db:
        assert db.exec(select(Experiment)).all() == []


def test_last_m_carries_at_most_m_sessions_into_the_prompt(data: Engine) -> None:
    exp = _run(data, _cfg(carry="last:2", reps=1), "last2")
    from pxp.storage.tables import Context

    with DB(data) as db:
        contexts = db.exec(select(Context).join(Session, col(Session.id) == col(Context.session_id))
                           .join(Run).where(Run.experiment_id == exp.id, Context.j == 1)).all()
    carried_counts = [len((c.content or {}).get("carried_sessions", [])) for c in contexts]
    assert carried_counts and max(carried_counts) == 2 and carried_counts[0] == 0


def test_a_prompt_beyond_the_context_window_is_warned_once_as_a_run_note(
    data: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="pxp.running.pxp.controlled.repetition"):
        exp = _run(data, _cfg(reps=1, extra={"context_window": 1_500}), "window")
    with DB(data) as db:
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).one()
    assert run.status == "finished" and run.note is not None and run.note.startswith(CONTEXT_NOTE)
    assert "--carry all" in run.note and "1,500" in run.note
    warned = [r for r in caplog.records if r.getMessage().startswith(CONTEXT_NOTE)]
    assert len(warned) == 1 and "\n" not in warned[0].getMessage()
    quiet = _run(data, _cfg(reps=1, carry="last:1", extra={"context_window": 1_500}), "window-last1")
    with DB(data) as db:
        assert db.exec(select(Run).where(Run.experiment_id == quiet.id)).one().note is None


def test_unknown_models_have_no_context_window() -> None:
    from pxp.llm.models import context_window

    assert context_window("anthropic:claude-sonnet-4-6") == 200_000
    assert context_window("anthropic:claude-sonnet-4-5-20250929") == 200_000
    assert context_window("openai:gpt-4.1") == 1_047_576
    assert context_window("openai:my-local-llama") is None
    assert context_window("simulated") is None


# --- report and CLI ------------------------------------------------------------------------------


def test_the_report_names_the_schedule(data: Engine) -> None:
    exp = _run(data, _cfg(eval_every=4, eval_sample=3), "sched")
    rep = report_json(data, exp.name)
    line = rep["performance"]["test"]["schedule"]
    assert line == "evaluated after every 4th session and after the last on a seeded sample of 3 test cases"
    assert "\n\n" + line in render(rep, "table")
    assert f"_{line}_" in render(rep, "markdown")
    paper = _run(data, _cfg(), "paper")
    line = report_json(data, paper.name)["performance"]["test"]["schedule"]
    assert line == "evaluated after every session on the whole test split"


def test_pxp_run_options_are_stored_and_like_keeps_them(db_url: str) -> None:
    make_text(get_engine(db_url), per_split=S)
    cli = CliRunner()
    base = ["--db", db_url, "run", "--dataset", "toy-text", "--split", "train", "--no-progress", "--format", "json"]
    res = cli.invoke(app, [*base, "--name", "A", "--eval-every", "5", "--eval-sample", "3", "--learn-sample", "4",
                           "--carry", "tokens:900"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["--db", db_url, "run", "--like", "A", "--name", "B", "--no-progress", "--format", "json",
                           "--eval-every", "2"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    engine = get_engine(db_url)
    with DB(engine) as db:
        a, b = (find_experiment(db, name_or_id=n) for n in ("A", "B"))
    assert a is not None and b is not None
    assert [a.config[k] for k in ("eval_every", "eval_sample", "learn_sample", "carry")] == [5, 3, 4, "tokens:900"]
    assert [b.config[k] for k in ("eval_every", "eval_sample", "learn_sample", "carry")] == [2, 3, 4, "tokens:900"]
    bad = cli.invoke(app, [*base, "--carry", "last:zero"])
    assert bad.exit_code != 0 and "--carry must be all, last:M or tokens:T" in bad.output
    resumed = cli.invoke(app, ["--db", db_url, "run", "--resume", "A", "--eval-every", "3"])
    assert resumed.exit_code == 1 and "--eval-every" in resumed.output
