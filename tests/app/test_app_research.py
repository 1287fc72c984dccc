"""The research pages through AppTest: the Experiments form starts the run it
shows, configuration errors are refused before anything is stored, the Sessions list says
how many sessions there are and pages through them, and Analytics keeps the researcher's
selection and opens on an experiment with something to count."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import func, select
from streamlit.testing.v1 import AppTest

from pxp.app.router import VIEWS
from pxp.app.selection import default_experiment, initial_experiments, parse_ids
from pxp.app.views.analytics_common import SMALL_COLUMNS
from pxp.running.pxp.checks import config_errors
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.live.assignment import create_live_experiment
from pxp.running.workers import pool as workers
from pxp.storage.tables import Experiment, Session
from tests.app import test_app
from tests.app.test_app import APP, md_tables, new_app, ok, texts, vega_charts
from tests.factories import LABELS, make_drug, make_rad

app_db = test_app.app_db  # the app's fixture: a fresh SQLite database, no API keys


def _experiments(engine: Engine) -> list[Experiment]:
    with DB(engine) as db:
        return list(db.exec(select(Experiment).order_by(Experiment.id)).all())


def _submit(at: object) -> None:
    buttons = [b for b in at.get("form_submit_button") if "start" in str(b.label)]  # type: ignore[attr-defined]
    buttons[0].click().run()


def test_changing_the_task_changes_the_dataset_and_the_run_that_starts(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine, name="a-drug")
    make_rad(engine, name="b-rad")
    at = new_app("experiments")
    assert at.selectbox(key="experiments_dataset").value == "a-drug"
    ok(at.selectbox(key="experiments_task").set_value("rad").run())
    # the dependent boxes follow at once: the RAD dataset and its splits
    assert at.selectbox(key="experiments_dataset").value == "b-rad"
    assert {o.split(" ")[0] for o in at.selectbox(key="experiments_split").options} == {"all", "train", "val", "test"}
    # the defaults of `pxp run` (docs/research.md, Controlled runs): the train split, LEARN on
    assert at.selectbox(key="experiments_split").value == "train" and at.toggle(key="experiments_learn").value
    ok(at.selectbox(key="experiments_split").set_value("val").run())
    at.number_input(key="experiments_n").set_value(6)
    at.number_input(key="experiments_k").set_value(2)
    at.number_input(key="experiments_reps").set_value(2)
    at.toggle(key="experiments_learn").set_value(False)
    _submit(at)
    ok(at)
    (exp,) = _experiments(engine)
    assert exp.config["dataset"] == "b-rad" and exp.config["split"] == "val" and exp.task == "rad"
    assert (exp.n, exp.k, exp.config["reps"], exp.config["machine"]) == (6, 2, 2, "simulated")
    assert workers.wait(engine, exp.id or 0, timeout=60) == 0
    summary = [re.sub(r"\\(.)", r"\1", s.value) for s in at.success]  # shown markdown-escaped
    assert summary == [f"Started '{exp.name}': dataset b-rad, split val, machine simulated, n=6, k=2, R=2."]


def test_a_bad_machine_is_refused_before_anything_is_stored(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.text_input(key="experiments_machine").input("nosuch:model")
    _submit(at)
    ok(at)
    assert _experiments(engine) == []
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "nothing stored" in errors[0] and "nosuch" in errors[0]
    # shown outside the launch expander, so a collapsed form does not hide it
    outside = [e for e in at.error if not any(type(p).__name__ == "Expander" for p in _parents(e))]
    assert outside
    assert not any("Resume" in str(b.label) for b in at.button)


def _parents(el: object) -> list[object]:
    out = []
    p = getattr(el, "parent", None)
    while p is not None:
        out.append(p)
        p = getattr(p, "parent", None)
    return out


def test_config_errors_name_each_problem() -> None:
    assert config_errors(RunConfig(dataset="d").as_dict()) == []
    assert config_errors(RunConfig(dataset="d", machine="anthropic:claude-x", checker="openai:gpt-4o").as_dict()) == []
    errs = config_errors(RunConfig(dataset="d", machine="nosuch:model", checker="lexicall", reps=0).as_dict())
    assert len(errs) == 3 and errs[0].startswith("machine ") and errs[1].startswith("checker ")


def test_the_sessions_list_says_how_many_and_pages_through_them(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine, per_label=11)  # 55 instances
    create_experiment(engine, RunConfig(dataset="toy-rad", reps=11), name="many")  # 605 open sessions
    with DB(engine) as db:
        total = int(db.exec(select(func.count()).select_from(Session)).one())
    assert total == 11 * 11 * len(LABELS) > 500
    at = new_app("sessions")
    assert f"The newest 500 of {total:,} sessions" in texts(at)
    ok(at.number_input(key="sessions_page").set_value(2).run())
    assert f"Sessions 501–{total:,} of {total:,}" in texts(at)
    ids = [int(x) for x in at.dataframe[0].value["session"]]
    assert len(ids) == total - 500 and max(ids) == min(ids) + len(ids) - 1


def test_an_open_session_is_not_counted_rather_than_seven_noes(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    create_experiment(engine, RunConfig(dataset="toy-rad"), name="open")
    at = new_app("sessions")
    shown = texts(at)
    assert "Not counted (open)" in shown and "— no" not in shown


def _finished_and_live(engine: Engine) -> tuple[int, int, int]:
    make_rad(engine)
    a = create_experiment(engine, RunConfig(dataset="toy-rad"), name="done-a")
    run_experiment(engine, a.id or 0)
    b = create_experiment(engine, RunConfig(dataset="toy-rad", seed=1), name="done-b")
    run_experiment(engine, b.id or 0)
    live = create_live_experiment(engine, dataset="toy-rad", name="live-empty")
    return a.id or 0, b.id or 0, live


def test_analytics_opens_on_the_newest_experiment_with_finished_sessions(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    _, b, _ = _finished_and_live(engine)
    at = new_app("analytics")
    assert at.multiselect(key="analytics_experiments").value == [b]
    assert "nothing to count" not in texts(at)
    assert at.query_params["exp"] == str(b)  # the selection is in the URL, to share or bookmark


def test_analytics_opens_the_selection_in_the_url(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    a, _, _ = _finished_and_live(engine)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["exp"] = str(a)  # a fresh visit to a shared link
    ok(at.run())
    ok(at.switch_page(str(VIEWS / "analytics.py")).run())
    assert at.multiselect(key="analytics_experiments").value == [a]


def test_analytics_keeps_the_selection_across_reruns_and_visits(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    a, _, _ = _finished_and_live(engine)
    at = new_app("analytics")
    ok(at.multiselect(key="analytics_experiments").set_value([a]).run())
    ok(at.radio(key="analytics_view").set_value("Session lengths").run())
    ok(at.run())
    assert at.multiselect(key="analytics_experiments").value == [a]
    ok(at.switch_page(str(VIEWS / "sessions.py")).run())
    ok(at.switch_page(str(VIEWS / "analytics.py")).run())
    assert at.multiselect(key="analytics_experiments").value == [a]
    assert at.radio(key="analytics_view").value == "Session lengths"


def test_the_selection_rule() -> None:
    exps = [{"id": 1, "ended": 3}, {"id": 2, "ended": 5}, {"id": 3, "ended": 0}]
    assert default_experiment(exps) == 2
    assert default_experiment([{"id": 7, "ended": 0}]) == 7 and default_experiment([]) is None
    assert parse_ids("3, x,5,") == [3, 5]
    assert initial_experiments(exps, "1,9", [2]) == [1]  # the URL wins; unknown ids dropped
    assert initial_experiments(exps, None, [3]) == [3]  # then the last choice
    assert initial_experiments(exps, None, None) == [2]
    assert initial_experiments(exps, "", None) == []  # an explicit "all experiments"


def _run(engine: Engine, name: str, **kw: object) -> int:
    exp = create_experiment(engine, RunConfig(dataset=kw.pop("dataset", "toy-rad"), **kw), name=name)  # type: ignore[arg-type]
    run_experiment(engine, exp.id or 0)
    return exp.id or 0


def test_figure1_ticks_are_message_bounds_with_a_title_and_a_band_when_n_is_large(
    app_db: tuple[str, Engine],
) -> None:
    from pxp.analysis import figures, tables
    from pxp.analysis.queries import Selection

    _, engine = app_db
    make_rad(engine)
    small, large = _run(engine, "small", n=4, k=2), _run(engine, "large", n=40, k=3)
    for eid, n in ((small, 4), (large, 40)):
        t = tables.table1(engine, Selection(experiments=(eid,)))
        spec = figures.figure1({"x": t})
        x = spec["encoding"]["x"]
        ticks = x["axis"]["values"]
        assert ticks[0] == 1 and ticks[-1] == n and all(1 <= v <= n for v in ticks)
        assert len(ticks) <= 21 and x["scale"]["domain"][0] > 0
        assert "Figure 1" in spec["title"]["text"] and spec["description"].startswith("Figure 1")
        spread = spec["layer"][0]["mark"]["type"]  # error bars, or a band where they would crowd
        assert spread == ("errorbar" if n == 4 else "area")
        assert ("error bars" in spec["title"]["text"]) == (n == 4)
        assert sorted(spec["data"]["values"].j.unique()) == list(range(1, n + 1))


def test_figure2_repetition_lines_fade_with_r(app_db: tuple[str, Engine]) -> None:
    import pandas as pd

    from pxp.analysis import figures

    rows = [{"experiment": "e", "repetition": r, "after_session": s, "prediction": 0.5, "explanation": 0.4,
             "both": 0.3, "instances": 5} for r in range(1, 101) for s in range(3)]
    spec = figures.figure2(pd.DataFrame(rows))
    faint, median = spec["layer"]
    assert faint["transform"] == [{"filter": {"field": "kind", "equal": "repetition"}}]
    assert faint["mark"]["opacity"] <= 0.06 and faint["encoding"]["detail"]["field"] == "repetition"
    assert median["mark"]["strokeWidth"] > faint["mark"]["strokeWidth"]
    runs = spec["data"]["values"].query("kind == 'repetition'")
    assert len(runs.groupby(["repetition", "curve"])) == 300  # each repetition's three lines
    assert "Figure 2" in spec["title"]["text"] and spec["encoding"]["y"]["scale"]["domain"] == [0, 1.02]


def test_the_labels_view_says_why_drug_cases_have_no_label(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    _run(engine, "drug-run", dataset="toy-drug")
    at = new_app("analytics")
    ok(at.radio(key="analytics_view").set_value("Labels").run())
    assert any("DRUG" in i.value and "no label" in i.value for i in at.info)


def test_the_theme_primary_colour_is_not_red() -> None:
    import tomllib
    from pathlib import Path

    theme = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())["theme"]
    r, g, b = (int(theme["primaryColor"][i:i + 2], 16) for i in (1, 3, 5))
    assert not (r > 180 and g < 110 and b < 110), theme["primaryColor"]  # Streamlit's default is #ff4b4b


def test_the_latency_histogram_starts_at_zero_seconds(app_db: tuple[str, Engine]) -> None:
    from pxp.storage.store import db_session
    from pxp.storage.tables import LLMCall

    _, engine = app_db
    make_rad(engine)
    eid = _run(engine, "calls")
    with db_session(engine) as db:
        for i, s in enumerate(db.exec(select(Session)).all()):
            db.add(LLMCall(experiment_id=eid, run_id=s.run_id, session_id=s.id, provider="openai", model="m",
                           purpose="ask", tokens_in=10, tokens_out=5, latency_ms=3.0 + i, cost_usd=0.001))
    at = new_app("analytics")
    ok(at.radio(key="analytics_view").set_value("LLM cost").run())
    ((hist, data),) = vega_charts(at)
    x = hist["encoding"]["x"]
    assert x["bin"]["extent"][0] == 0 and x["scale"]["domainMin"] == 0
    assert data.latency_s.min() >= 0 and data.latency_s.max() == pytest.approx(x["bin"]["extent"][1])


def test_wide_tables_keep_their_first_column_in_view(app_db: tuple[str, Engine]) -> None:
    import json

    _, engine = app_db
    _finished_and_live(engine)
    for name in ("done-c", "done-d"):  # with repetitions: a min–max column each
        extra = create_experiment(engine, RunConfig(dataset="toy-rad", seed=2, reps=2), name=name)
        run_experiment(engine, extra.id or 0)
    at = new_app("analytics")
    ok(at.selectbox(key="analytics_columns").set_value("experiment").run())
    ok(at.multiselect(key="analytics_experiments").set_value([]).run())  # all four: a wide table, in the grid
    cols = json.loads(at.dataframe[0].proto.columns)
    assert any(c.get("pinned") for c in cols.values()), cols
    assert at.dataframe[0].value.shape[1] > SMALL_COLUMNS
    ok(at.multiselect(key="analytics_experiments").set_value([extra.id]).run())  # one: small, drawn as text
    assert not at.dataframe and list(md_tables(at)[0].columns) == ["Count", "done-d", "done-d min–max"]


def test_a_small_table_shows_hostile_cells_as_text() -> None:
    """ui.small_table (Table 1, Compare): every cell is escaped text; a pipe, a tag, a link or a line break in
    a name neither breaks the table nor renders."""

    def page() -> None:
        import pandas as pd

        from pxp.app import ui

        ui.small_table(pd.DataFrame({"Count": ["<img src=x onerror=alert(1)>", "a | b\nc"],
                                     "[x](javascript:alert(1))": [1.5, 2.0]}))

    at = AppTest.from_function(page).run()
    assert not at.exception
    [df] = md_tables(at)
    assert list(df.columns) == ["Count", "[x](javascript:alert(1))"]
    assert list(df["Count"]) == ["<img src=x onerror=alert(1)>", "a | b c"] and list(df.iloc[:, 1]) == [1.5, 2.0]
    shown = at.markdown[0].value
    assert not re.search(r"(?<!\\)[<>\[\]()]", shown), shown  # every bracket escaped: no tag, no link
