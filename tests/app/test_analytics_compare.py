"""The Analytics page's Compare view through AppTest (docs/research.md, Grids and comparisons): the same paired
comparison
as `pxp report --compare` and `pxp report --study`, for two experiments or a study."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from pxp.analysis.statistics import compare_experiments
from pxp.analysis.study import study_json
from pxp.analysis.tables import SHORT_LABELS
from pxp.app.router import VIEWS as VIEW_DIR
from pxp.app.views.analytics_compare import sig3
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.grid import create_study, prepare_study
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session, find_experiment, get_engine
from tests.app.test_analytics_page import chart_ys
from tests.app.test_app import md_tables, plain
from tests.factories import make_rad

PAGE = str(VIEW_DIR / "analytics.py")
GRID = """
name = "duo"
[grid]
machine = [{ label = "weak", machine = "simulated", simulated = { accuracy = 0.1, adopt = 0.0 } },
           { label = "strong", machine = "simulated", simulated = { accuracy = 1.0, adopt = 1.0 } }]
dataset = ["toy-rad"]
seed = [3]
[run]
n = 4
k = 3
reps = 2
"""
A, B = "duo/weak/toy-rad/s3", "duo/strong/toy-rad/s3"
WIDE, ELSEWHERE = "wide", "elsewhere"  # every instance (A: the train split), once; another dataset


@pytest.fixture
def engine_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(url)
    make_rad(engine, per_label=3)
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    study, estimates = prepare_study(engine, path)
    for exp in create_study(engine, study, estimates):
        run_experiment(engine, exp.id or 0)
    make_rad(engine, name="other-rad", per_label=1)
    for cfg, name in ((RunConfig(dataset="toy-rad", n=4, seed=3), WIDE),
                      (RunConfig(dataset="other-rad", n=4), ELSEWHERE)):
        run_experiment(engine, create_experiment(engine, cfg, name=name).id or 0)
    yield engine


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_compare_two_experiments_and_a_study(engine_: Engine) -> None:
    at = ok(AppTest.from_file(PAGE, default_timeout=60).run())
    ok(at.radio(key="analytics_view").set_value("Compare").run())
    ok(at.selectbox(key="analytics_compare_a").set_value(A).run())
    ok(at.selectbox(key="analytics_compare_b").set_value(B).run())
    table = md_tables(at)[0]
    want = compare_experiments(engine_, A, B)
    assert list(table["Property"]) == [SHORT_LABELS[m["metric"]] for m in want["metrics"]]
    # three significant digits shown (0.933, not 0.9); the download holds every digit
    assert list(table["A − B"]) == [float(f"{m['difference']:.3g}") for m in want["metrics"]]
    assert list(table["McNemar p"]) == [float(f"{m['p_value']:.3g}") for m in want["metrics"]]
    assert list(table["95% CI"]) == [f"{sig3(m['ci_low'])} to {sig3(m['ci_high'])}" for m in want["metrics"]]
    assert any(f"--experiment {A} --experiment {B} --compare" in c.value for c in at.text)
    # one line names every difference and how many sessions were paired
    line = f"{want['pairs']} sessions (same repetition and instance, {want['instances']} instances) of A's"
    assert any("A and B differ in machine simulated (accuracy 0.1, adopt 0) vs simulated (accuracy 1, adopt 1)"
               in plain(c.value) and line in plain(c.value) for c in at.caption)

    ok(at.selectbox(key="analytics_compare_b").set_value(A).run())
    assert any("two different experiments" in i.value for i in at.info)

    ok(at.radio(key="analytics_compare_what").set_value("A study").run())
    assert at.selectbox(key="analytics_compare_study").value == "duo"
    rep = study_json(engine_, "duo")
    study_table = md_tables(at)[0]
    assert list(study_table["A − B"]) == [float(f"{m['difference']:.3g}") for m in rep["comparisons"][0]["metrics"]]
    assert list(study_table["B"]) == [1.0, 1.0, 1.0] and len(md_tables(at)) == 1  # one machine pair
    assert any("weak vs strong" in h.value for h in at.subheader)
    assert any("pxp report --study duo" in c.value for c in at.text)


def test_different_totals_side_by_side_and_nothing_to_pair(engine_: Engine) -> None:
    """Figure 1 of experiments of 5 and 15 sessions (a repetition) defaults to proportions and says why; Compare
    names their differences, and refuses a paired test with an experiment on another dataset."""
    at = ok(AppTest.from_file(PAGE, default_timeout=60).run())
    with db_session(engine_) as db:
        exps = [find_experiment(db, name_or_id=n) for n in (A, WIDE)]
    ok(at.multiselect(key="analytics_experiments").set_value([e.id for e in exps if e]).run())
    ok(at.radio(key="analytics_view").set_value("Figure 1").run())
    assert at.toggle(key="analytics_fig1_proportion_differ").value is True
    assert all(0 <= y <= 1 for ys in chart_ys(at).values() for y in ys)
    assert any("Shown as proportions: the session totals differ" in c.value for c in at.caption)
    ok(at.toggle(key="analytics_fig1_proportion_differ").set_value(False).run())
    assert max(y for ys in chart_ys(at).values() for y in ys) > 1
    assert any("Counts of different totals do not compare" in c.value for c in at.caption)

    ok(at.radio(key="analytics_view").set_value("Compare").run())
    ok(at.selectbox(key="analytics_compare_a").set_value(A).run())
    ok(at.selectbox(key="analytics_compare_b").set_value(WIDE).run())
    shown = " ".join(plain(c.value) for c in at.caption)
    assert all(f in shown for f in ("split train vs all", "repetitions 2 vs 1", "Paired 5 sessions",
                                    "A's 10 and B's 15"))
    ok(at.selectbox(key="analytics_compare_b").set_value(ELSEWHERE).run())
    assert any("no paired test (they differ in dataset toy-rad vs other-rad" in plain(w.value) for w in at.warning)
    assert not md_tables(at)
