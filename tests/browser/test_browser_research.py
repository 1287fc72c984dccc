"""The Experiments page in a real browser: after Task changes, the launch summary
names exactly the run that started (its stored Experiment row). Reuses the app's browser
harness (tests/browser/test_browser_app.py); screenshots of the page and of Analytics' figures go
to artifacts/."""

from __future__ import annotations

import re
import time

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.analysis.statistics import compare_experiments, difference_line
from pxp.running.workers import pool as workers
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment
from tests.browser.test_browser_app import ARTIFACTS, _idle, launch, server  # noqa: F401  (server is a fixture)

pytestmark = pytest.mark.browser


def test_the_launch_summary_is_the_run_that_started(server: tuple[str, str]) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/experiments")
            expect(page.get_by_label("Task")).to_be_visible(timeout=90_000)
            _idle(page)
            page.get_by_label("Task").click()
            page.get_by_role("option", name="rad", exact=True).click()
            _idle(page)
            # the dataset box followed the task at once
            expect(page.get_by_label("Dataset")).to_have_value("demo-rad")
            page.get_by_label("Split").click()
            page.get_by_role("option", name=re.compile(r"^train \(\d+\)$")).click()  # the demo's split: Compare pairs
            _idle(page)
            page.get_by_role("spinbutton", name="R (repetitions)").fill("2")
            page.get_by_role("button", name=re.compile("Create and start")).click()
            _idle(page)
            summary = page.get_by_text(re.compile(r"^Started '"))
            expect(summary).to_be_visible(timeout=90_000)
            text = summary.inner_text()
            page.screenshot(path=str(ARTIFACTS / "experiments-launch.png"), full_page=True)

            engine = get_engine(url)
            with DB(engine) as db:
                exp = db.exec(select(Experiment).where(Experiment.mode == "controlled")
                              .order_by(Experiment.id.desc())).first()  # type: ignore[union-attr]
            assert exp is not None
            c = exp.config
            assert text == (f"Started '{exp.name}': dataset {c['dataset']}, split {c['split']}, "
                            f"machine {c['machine']}, n={c['n']}, k={c['k']}, R={c['reps']}.")
            assert (c["dataset"], c["split"], c["reps"], exp.task) == ("demo-rad", "train", 2, "rad")
            deadline = time.monotonic() + 120  # the app's worker: seen through the database
            while workers.progress(engine, exp.id or 0).status != "finished" and time.monotonic() < deadline:
                time.sleep(0.3)
            assert workers.progress(engine, exp.id or 0).status == "finished"

            page.goto(f"{base}/analytics")
            expect(page.get_by_text("Figure 1", exact=True)).to_be_visible(timeout=90_000)
            page.get_by_text("Figure 1", exact=True).click()
            _idle(page)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)  # plotly draws after the script run
            page.screenshot(path=str(ARTIFACTS / "analytics-figure1.png"), full_page=True)
            assert f"exp={exp.id}" in page.url  # the selection is in the URL

            # Compare says in one line every difference and how many sessions it paired
            with DB(engine) as db:
                demo = db.exec(select(Experiment).where(Experiment.name == "demo-rad-simulated")).one()
            line = difference_line(compare_experiments(engine, demo.name, exp.name))
            assert "A and B differ in " in line and " Paired " in line
            page.goto(f"{base}/analytics?view=Compare&exp={demo.id},{exp.id}")
            expect(page.get_by_text(f"A = {demo.name}, B = {exp.name}. {line}")).to_be_visible(timeout=90_000)
        finally:
            browser.close()
