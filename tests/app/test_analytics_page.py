"""The Analytics page through streamlit.testing.v1.AppTest: the numbers on the page equal
`pxp report` on the same database; every view renders for real, empty and single-session
experiments; downloads and the "reproduce this table" line (docs/research.md, Analytics)."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col as sql_col
from sqlmodel import select
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from pxp.analysis import performance, queries, tables
from pxp.app.router import VIEWS as VIEW_DIR
from pxp.data.importers.transcripts import import_transcripts
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session, get_engine
from pxp.storage.tables import Annotator, Experiment, Instance, LLMCall, Message, Run, Session
from tests.analysis.test_agreement import write_study
from tests.analysis.test_analytics import VECTORS, write_vectors
from tests.app.test_app import md_tables, vega_charts
from tests.factories import make_rad

PAGE = str(VIEW_DIR / "analytics.py")
VIEWS = ("Table 1", "Figure 1", "Figure 2", "Transitions", "Session lengths", "Labels", "Annotators",
         "LLM cost", "Per-session flags")
NASTY = "<img src=x onerror=alert(1)> **bold** [x](http://evil.example) | pipe"


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(url)
    make_rad(engine)  # a dataset, so the app does not load its demo data on first start
    yield url, engine


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    return ok(at.run())


def cli(url: str, *args: str) -> str:
    from pxp.cli.main import app

    res = CliRunner().invoke(app, ["--db", url, *args])
    assert res.exit_code == 0, res.output
    return res.output


def controlled(engine: Engine, name: str, reps: int = 3, seed: int = 1, **kw: Any) -> Experiment:
    cfg = RunConfig(dataset="toy-rad", reps=reps, seed=seed, shuffle=True, learn=True, eval_at_start=True,
                    simulated={"accuracy": 0.5, "adopt": 0.5, "mislead": 0.3}, **kw)
    exp = create_experiment(engine, cfg, name=name)
    run_experiment(engine, exp.id or 0)
    return exp


def chart_ys(at: AppTest) -> dict[str, list[float]]:
    """Figure 1's medians per curve, in the order of the bound j, from the first chart."""
    _, data = vega_charts(at)[0]
    return {str(k): d.sort_values("j")["median"].tolist() for k, d in data.groupby("curve")}


def all_views(at: AppTest) -> None:
    for v in VIEWS:
        ok(at.radio(key="analytics_view").set_value(v).run())


def test_page_numbers_equal_pxp_report(app_db: tuple[str, Engine]) -> None:
    url, engine = app_db
    a = controlled(engine, "RAD-a", reps=3, seed=1)
    b = controlled(engine, "RAD-b", reps=2, seed=2)
    at = page()
    ok(at.multiselect(key="analytics_experiments").set_value([a.id, b.id]).run())
    shown = md_tables(at)[0]
    printed = list(csv.DictReader(io.StringIO(cli(url, "report", "--experiment", "RAD-a", "--experiment", "RAD-b",
                                                  "--format", "csv"))))
    # the same row labels, and for each experiment the same counts, proportions and min–max (the CSV is tidy)
    for name in ("RAD-a", "RAD-b"):
        body = [r for r in printed if r["experiment"] == name]
        assert list(shown["Count"])[1:-1] == [r["label"] for r in body]
        assert list(shown[name])[1:-1] == [f"{r['count (sessions)']} ({float(r['proportion (of total)']):.2f})"
                                           for r in body]
        assert list(shown[f"{name} min–max"])[1:-1] == [f"{r['min (sessions)']}–{r['max (sessions)']}" for r in body]
        assert shown[name].iloc[0] == body[0]["total (sessions)"]
    # and the JSON of `pxp report` equals the page's Table1 exactly
    rep = json.loads(cli(url, "report", "--experiment", "RAD-a", "--format", "json"))
    perf = rep.pop("performance")
    assert rep == tables.table1(engine, queries.Selection(experiments=(a.id or 0,)), n=a.n).as_json("RAD-a")
    assert rep["repetitions"] == 3 and rep["total_sessions"] == 10
    # Figure 2's medians equal the machine performance series `pxp report` prints
    med = performance.performance_median(performance.evaluations(engine, queries.Selection(experiments=(a.id or 0,))))
    assert med.after_session.tolist() == perf["test"]["after_session"]
    for m in ("prediction", "explanation", "both"):
        assert med[m].tolist() == pytest.approx(perf["test"]["median"][m])
        assert med[f"{m}_min"].tolist() == pytest.approx(perf["test"]["min"][m])
        assert med[f"{m}_max"].tolist() == pytest.approx(perf["test"]["max"][m])
    # the reproduce line names both experiments
    codes = [c.value for c in at.text]
    assert "pxp report --experiment RAD-a --experiment RAD-b --format markdown" in codes
    all_views(at)


def test_design_vectors_on_the_page(app_db: tuple[str, Engine], tmp_path: Path) -> None:
    url, engine = app_db
    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    at = page()
    shown = md_tables(at)[0]
    assert list(shown["vectors"]) == ["3", "2 (0.67)", "2 (0.67)", "2 (0.67)", "1 (0.33)", "2 (0.67)",
                                      "0 (0.00)", "1 (0.33)", "0"]
    md = cli(url, "report", "--experiment", "vectors", "--format", "markdown")
    assert "| 2-way intelligible sessions | 2 (0.67) |" in md
    # Figure 1: the curves of DESIGN §2, as counts and as proportions
    ok(at.radio(key="analytics_view").set_value("Figure 1").run())
    ys = chart_ys(at)
    assert ys["2-way"] == [0, 0, 1, 2, 2, 2, 2, 2, 2, 2]
    assert ys["1-way for Human"] == [0, 1, 1, 2, 2, 2, 2, 2, 2, 2]
    ok(at.toggle(key="analytics_fig1_proportion").set_value(True).run())
    assert chart_ys(at)["2-way"][-1] == pytest.approx(2 / 3)
    all_views(at)


def test_empty_and_single_session_experiments_render(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    at = page()
    ok(at)  # no experiment at all: an explanation, no error
    assert any("No experiments yet" in i.value for i in at.info)

    # an experiment whose sessions are all still open, and one with a single finished session
    empty = create_experiment(engine, RunConfig(dataset="toy-rad", reps=2), name="not-started")
    with db_session(engine) as db:
        exp = Experiment(name="single", task="rad", n=10)
        db.add(exp)
        db.flush()
        run = Run(experiment_id=exp.id or 0, repetition=1)
        db.add(run)
        db.flush()
        inst = db.get(Instance, 1)
        assert inst is not None
        s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=1, status="finished", stop_reason="ratified")
        db.add(s)
        db.flush()
        for j, (snd, tag) in enumerate([("machine", "INIT"), ("human", "RATIFY"), ("machine", "RATIFY")], 1):
            db.add(Message(session_id=s.id or 0, j=j, sender=snd, receiver="x", tag=tag))
    for exp_id in (empty.id, exp.id):
        at = page()
        ok(at.multiselect(key="analytics_experiments").set_value([exp_id]).run())
        all_views(at)
        for columns in ("annotator", "label", "dataset", "pooled"):
            ok(at.radio(key="analytics_view").set_value("Table 1").run())
            ok(at.selectbox(key="analytics_columns").set_value(columns).run())
    at = page()
    ok(at.multiselect(key="analytics_experiments").set_value([empty.id]).run())
    assert any("nothing to count" in i.value for i in at.info)
    at = page()
    ok(at.multiselect(key="analytics_experiments").set_value([exp.id]).run())
    shown = md_tables(at)[0]
    assert list(shown["single"])[:4] == ["1", "1 (1.00)", "1 (1.00)", "1 (1.00)"]


def test_annotators_labels_costs_and_filters(app_db: tuple[str, Engine], tmp_path: Path) -> None:
    """Live-style data: two annotators (one with a hostile name) on the same instances, LLM calls,
    the runner's evaluations; the annotator columns, κ, the label filter and the per-session download."""
    url, engine = app_db
    exp = controlled(engine, NASTY, reps=2, seed=3)
    with db_session(engine) as db:
        h1, h2 = Annotator(name="h1"), Annotator(name=NASTY)
        db.add_all([h1, h2])
        db.flush()
        sessions = list(db.exec(_sessions_of(exp.id or 0)).all())
        for s in sessions:
            s.annotator_id = h1.id if s.run_id == sessions[0].run_id else h2.id
            db.add(s)
            db.add(LLMCall(experiment_id=exp.id, run_id=s.run_id, session_id=s.id, provider="openai", model="m",
                           purpose="ask", tokens_in=10, tokens_out=5, latency_ms=250.0, cost_usd=0.001))
    at = page()
    ok(at.selectbox(key="analytics_columns").set_value("annotator").run())
    shown = md_tables(at)[0]
    assert "h1" in shown.columns and NASTY in shown.columns
    # the page's reproduce line, run, prints the same columns
    (line,) = [c.value for c in at.text]
    assert line == f"pxp report --experiment {shlex.quote(NASTY)} --by annotator --format markdown"
    printed = list(csv.DictReader(io.StringIO(cli(url, *shlex.split(line)[1:-2], "--format", "csv"))))
    assert {r["experiment"] for r in printed} == {"h1", NASTY}
    for name in ("h1", NASTY):
        body = [r for r in printed if r["experiment"] == name]
        assert [r["label"] for r in body] == list(shown["Count"])[1:-1]
        assert [f"{r['count (sessions)']} ({float(r['proportion (of total)']):.2f})" for r in body] == list(
            shown[name])[1:-1]
    ok(at.radio(key="analytics_view").set_value("Annotators").run())
    kappa = at.dataframe[1].value
    assert kappa["instances"].tolist() == [10]
    ok(at.radio(key="analytics_view").set_value("LLM cost").run())
    assert at.metric[0].value == "20"  # 2 repetitions × 10 sessions, one call each
    ok(at.radio(key="analytics_view").set_value("Figure 2").run())  # the runner's evaluations
    ((spec, data),) = vega_charts(at)
    assert set(data.panel) == {NASTY} and NASTY not in json.dumps(spec)  # a name is data, never part of the spec
    ok(at.radio(key="analytics_view").set_value("Labels").run())
    by_label = at.dataframe[0].value
    assert sorted(by_label["label"]) == ["Atelectasis", "Cardiomegaly", "Pleural Effusion", "Pneumonia",
                                         "Pneumothorax"]
    assert by_label["total sessions"].tolist() == [2.0] * 5
    assert all(re.fullmatch(r"\d+(\.\d+)? \(\d\.\d\d\)", c) for c in by_label["2-way"])
    ok(at.multiselect(key="analytics_labels").set_value(["Pneumonia"]).run())
    ok(at.radio(key="analytics_view").set_value("Per-session flags").run())
    flags = at.dataframe[0].value
    assert set(flags["label"]) == {"Pneumonia"} and len(flags) == 4
    # hostile names stay text: every "<", "[" and "*" reaching markdown is backslash-escaped
    shown_md = [m.value for m in [*at.markdown, *at.caption]]
    assert any("img src" in v for v in shown_md)
    for v in shown_md:
        assert not re.search(r"(?<!\\)[<\[*]", v), v


def _sessions_of(experiment_id: int) -> Any:
    from sqlmodel import col, select

    return select(Session).join(Run, col(Run.id) == col(Session.run_id)).where(Run.experiment_id == experiment_id)


def test_annotators_view_shows_agreement_and_disagreements(app_db: tuple[str, Engine], tmp_path: Path) -> None:
    """docs/research.md, Agreement: the Annotators view's κ and α equal `pxp report --agreement`; the disagreement
    list names both sessions."""
    url, engine = app_db
    import_transcripts(engine, write_study(tmp_path / "study.jsonl"), name="study", n=4, k=3)
    at = page()
    ok(at.radio(key="analytics_view").set_value("Annotators").run())
    # the annotators' breakdown, κ on first/last tag, then the agreement table and the disagreements
    frames = [d.value for d in at.dataframe]
    assert len(frames) == 4
    table, dis = frames[2], frames[3]
    rep = json.loads(cli(url, "report", "--experiment", "study", "--agreement", "--format", "json"))["agreement"]
    assert len(table) == sum(len(f["pairs"]) for f in rep.values())
    for r in table.itertuples(index=False):
        want = rep[r[0]]
        k, alpha = want["pairs"][f"{r[1]}|{r[2]}"]["cohen_kappa"], want["krippendorff_alpha"]
        assert r[3] == want["pairs"][f"{r[1]}|{r[2]}"]["n"]
        # an undefined κ reads "—" (the column is then text, its numbers as :g)
        assert (r[4] == "—" if k is None else float(r[4]) == pytest.approx(k, rel=1e-5))
        assert r[5] == pytest.approx(alpha)
    assert len(dis) == 8 and {"session_a", "session_b"} <= set(dis.columns)
    # each session id links to that session on the Sessions page (the router checks the user may open it)
    assert all(str(v).startswith("sessions?session=") and str(v).removeprefix("sessions?session=").isdigit()
               for v in [*dis["session_a"], *dis["session_b"]])
    assert "Disagreements (8)" in [h.value for h in at.subheader]


def test_page_never_allows_html() -> None:
    assert "unsafe_allow_html" not in Path(PAGE).read_text()


def test_aborted_sessions_are_shown_by_reason(app_db: tuple[str, Engine]) -> None:
    """Table 1's view names why sessions aborted (DESIGN §1 "Format failures"), as `pxp report` does."""
    url, engine = app_db
    a = controlled(engine, "RAD-aborts", reps=1, seed=3)
    with db_session(engine) as db:
        first, second = db.exec(select(Session).join(Run).where(Run.experiment_id == a.id)
                                .order_by(sql_col(Session.ordinal))).all()[:2]
        first.status, first.abort_reason = "aborted", "refusal: openai:m gave no usable answer in 5 attempts (x)"
        second.status, second.abort_reason = "aborted", "empty reply: openai:m gave no usable answer in 5 attempts"
        db.add(first)
        db.add(second)
    at = page()
    ok(at.multiselect(key="analytics_experiments").set_value([a.id]).run())
    assert "Aborted sessions by reason (all repetitions): refusal 1, empty reply 1." in [c.value for c in at.caption]
    rep = json.loads(cli(url, "report", "--experiment", "RAD-aborts", "--format", "json"))
    assert rep["aborted_by_reason"] == {"refusal": 1, "empty reply": 1}


def test_table1_and_its_aborted_line_follow_a_new_session(app_db: tuple[str, Engine], tmp_path: Path) -> None:
    """The page's cached numbers (by data version) are never stale: a session stored between two runs of the
    page shows in Table 1 and in the aborted-by-reason line on the next run."""
    from tests.analysis.test_cache import store_session

    _, engine = app_db
    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    at = page()

    def total_and_aborted() -> tuple[str, list[str]]:
        df = md_tables(at)[0]
        return (str(df.iloc[0, 1]), [c.value for c in at.caption if "Aborted sessions by reason" in c.value])

    assert total_and_aborted() == ("3", [])
    ok(at.run())
    assert total_and_aborted() == ("3", [])  # cached, the same
    store_session(engine, "vectors", "late", [("machine", "INIT")], abort_reason="the service did not answer")
    ok(at.run())
    total, aborted = total_and_aborted()
    assert (total, aborted) == ("4", ["Aborted sessions by reason (all repetitions): other 1."])
