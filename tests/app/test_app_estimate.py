"""The Experiments page shows the estimate before Launch and stores it with the run (docs/research.md, Cost
estimate)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app.ui import launch_summary
from pxp.storage.tables import Experiment
from tests.app.test_app import app_db, new_app, ok, texts  # noqa: F401  (app_db is a fixture)
from tests.factories import make_drug


def test_estimate_before_launch(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    from pxp.running.workers import pool as workers

    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.number_input(key="experiments_reps").set_value(2)
    at.text_input(key="experiments_name").input("est-run")
    def button(label: str) -> Any:
        buttons: list[Any] = list(at.get("form_submit_button"))
        [b] = [b for b in buttons if label in str(b.label)]
        return b

    estimate = button("Estimate")
    ok(estimate.click().run())
    assert "Estimate before launch" in texts(at) and "Assumptions:" in texts(at)
    assert "session messages" in at.dataframe[0].value["per repetition"].tolist()
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []  # nothing started
    start = button("start")
    ok(start.click().run())
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "est-run")).one()
    assert exp.config["estimate"]["calls"] > 0 and exp.config["estimate"]["usd"] == 0.0
    assert workers.wait(engine, exp.id or 0, timeout=60) == 0


def test_the_estimate_counts_probe_calls(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """With "Common-ground probe" on, the page's estimate has the probe row (the same Estimate as `pxp run`)."""
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.toggle(key="experiments_probe").set_value(True)
    [estimate] = [b for b in at.get("form_submit_button") if "Estimate" in str(b.label)]
    ok(estimate.click().run())
    rows = at.dataframe[0].value
    assert "common-ground probes" in rows["per repetition"].tolist()
    assert int(rows.loc[rows["per repetition"] == "common-ground probes", "calls"].iloc[0].replace(",", "")) > 0
    assert "3 private questions after each human message" in texts(at)
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []
    assert launch_summary("P", {"dataset": "d", "n": 3, "k": 2, "reps": 1, "probe": True}).endswith(
        "R=1, with the common-ground probe.")


def test_a_priced_run_starts_only_on_a_second_explicit_click(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """Nothing starts by accident (docs/research.md, Cost estimate): the forms that create or start do not
    submit on Enter, and a run estimated above $0 waits with its estimate beside the start button."""
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    forms = {f.proto.form.form_id: f.proto.form.enter_to_submit for f in at.get("form")}
    assert forms and not any(forms.values()), forms
    at.text_input(key="experiments_machine").input("anthropic:claude-sonnet-4-6")
    at.text_input(key="experiments_name").input("priced")
    [start] = [b for b in at.get("form_submit_button") if "start" in str(b.label)]
    ok(start.click().run())
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []  # one click: nothing created, nothing spent
    [go] = [b for b in at.button if b.key == "experiments_confirm"]
    assert go.label.startswith("Start and spend about $") and "estimated to cost" in texts(at)
    [cancel] = [b for b in at.button if b.key == "experiments_cancel"]
    ok(cancel.click().run())
    assert not [b for b in at.button if b.key == "experiments_confirm"]
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []
    [start] = [b for b in at.get("form_submit_button") if "start" in str(b.label)]
    ok(start.click().run())
    [go] = [b for b in at.button if b.key == "experiments_confirm"]
    at = go.click().run()
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "priced")).one()
    assert exp.config["estimate"]["usd"] > 0


def test_no_form_of_the_app_submits_on_enter_but_the_game_answer() -> None:
    """Every `st.form` of the app that creates, starts, imports or saves takes a click (enter_to_submit=False);
    only the scorekeeping player's answer box sends on Enter, like a chat."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "pxp" / "app"
    calls = [(p.name, m.group(0)) for p in root.rglob("*.py")
             for m in re.finditer(r"st\.form\([^)]*\)", p.read_text())]
    assert len(calls) >= 5
    assert [c for c in calls if "enter_to_submit=False" not in c[1]] == [
        ("play.py", 'st.form(key=f"sk_play_form_{p.step}", border=False, enter_to_submit=True)')]


def test_an_unknown_cost_starts_only_on_a_second_explicit_click(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """Unknown cost is not zero cost: a model pxp has no price for waits like a priced run, says why its cost is
    unknown, and starts only on "Cost unknown: Start anyway"."""
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.text_input(key="experiments_machine").input("openai:my-local-model")
    at.text_input(key="experiments_name").input("unpriced")
    [start] = [b for b in at.get("form_submit_button") if "start" in str(b.label)]
    ok(start.click().run())
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []  # one click: nothing created
    [go] = [b for b in at.button if b.key == "experiments_confirm"]
    assert go.label == "Cost unknown: Start anyway"
    assert "Cost unknown: pxp has no price for openai" in texts(at) and "my\\-local\\-model" in texts(at)
    assert [b for b in at.button if b.key == "experiments_cancel"]
    ok(at.button(key="experiments_cancel").click().run())
    with DB(engine) as db:
        assert db.exec(select(Experiment)).all() == []


def test_a_run_whose_process_died_is_shown_interrupted_with_its_resume_line(
        app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """No silent death: an experiment stored as running whose process is gone (no heartbeat, a dead worker's
    claim) reads "interrupted" on the Experiments page, with the command that resumes it."""
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment

    _, engine = app_db
    make_drug(engine)
    exp = create_experiment(engine, RunConfig(dataset="toy-drug", reps=1), name="killed run")
    with DB(engine) as db:
        row = db.get(Experiment, exp.id)
        assert row is not None
        row.status, row.worker = "running", "no-such-host:1"
        db.add(row)
        db.commit()
    at = new_app("experiments")
    warnings = [w.value for w in at.warning]
    assert any("ended without finishing or pausing" in w and "pxp run \\-\\-resume \\'killed run\\'" in w
               for w in warnings), warnings


def test_the_estimate_writes_numbers_as_its_headline_does(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """An LLM run's estimate (no key needed): the table's calls and tokens read 423,314 as the headline's
    222,759,817 does, not 423314."""
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.text_input(key="experiments_machine").input("anthropic:claude-sonnet-4-6")
    at.number_input(key="experiments_reps").set_value(20)
    [estimate] = [b for b in at.get("form_submit_button") if "Estimate" in str(b.label)]
    ok(estimate.click().run())
    table = at.dataframe[0].value
    cells = [str(c) for col in ("calls", "tokens in", "tokens out") for c in table[col]]
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", c) for c in cells) and any("," in c for c in cells), cells
    headline = next(str(m.value) for m in at.markdown if "Estimate before launch" in str(m.value))
    assert re.search(r"\d{1,3}(,\d{3})+ input", headline), headline
