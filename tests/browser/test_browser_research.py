"""The Experiments page in a real browser: after Task changes, the launch summary
names exactly the run that started (its stored Experiment row). Reuses the app's browser
harness (tests/browser/test_browser_app.py); screenshots of the page and of Analytics' figures go
to artifacts/."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.analysis.statistics import compare_experiments, difference_line
from pxp.running.workers import pool as workers
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment
from tests.browser.test_browser_app import (  # noqa: F401  (server is a fixture)
    ARTIFACTS,
    _idle,
    launch,
    need_chromium,
    server,
    serving,
)
from tests.factories import make_rad

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
            page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=90_000)  # drawn after the script run
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


HOSTILE = '<b>x</b> & "y" {datum.a} [0].b'


def test_the_figures_draw_names_as_text(tmp_path: Path) -> None:
    """Figures 1 and 2 with an experiment whose name is markup, an expression and a field path: Vega draws it as
    the panel's heading, literally, and the chart's accessible name is its description."""
    from playwright.sync_api import sync_playwright

    from pxp.running.pxp.controlled.demo import ensure_demo
    from tests.app.test_analytics_page import controlled

    need_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    url = f"sqlite:///{tmp_path / 'names.db'}"
    engine = get_engine(url)
    ensure_demo(engine)  # what first start does; done here so seeding below does not race it
    make_rad(engine, name="toy-rad")
    ids = [controlled(engine, name, reps=2).id for name in (HOSTILE, "plain")]
    with serving(url, tmp_path) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for view in ("Figure+1", "Figure+2"):
                page.goto(f"{base}/analytics?view={view}&exp={ids[0]},{ids[1]}")
                chart = page.locator('[data-testid="stVegaLiteChart"]')
                chart.locator("svg.marks").wait_for(timeout=90_000)
                page.wait_for_function("() => [...document.querySelectorAll('svg.marks text')].some("
                                       "(t) => t.textContent === 'plain')", timeout=90_000)
                headings = chart.locator("svg.marks text").all_text_contents()
                assert HOSTILE in headings and "plain" in headings, headings
                assert chart.locator("svg.marks b").count() == 0  # no element made of the name
                assert chart.get_attribute("aria-label", timeout=5_000).startswith(view.replace("+", " ") + ":")
            page.screenshot(path=str(ARTIFACTS / "analytics-figure2-names.png"), full_page=True)
        finally:
            browser.close()
