"""Pages that wait say what for, in a real browser at 1280×720. First start (docs/operations.md, First start): on a
fresh database the page is drawn at once, says what is being made and shows its progress, then Home replaces it
when the demo is ready. Datasets: the case cards are all on the page, with a line saying how many cases are being
drawn, before their drawings come."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from pxp.app import FIRST_START_TITLE
from tests.browser.test_browser_app import ARTIFACTS, app_page
from tests.browser.test_browser_fail_closed import _need_chromium

pytestmark = pytest.mark.browser


def test_a_fresh_database_shows_what_is_being_made_then_home(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    _need_chromium()
    url = f"sqlite:///{tmp_path / 'fresh.db'}"  # nothing there: the server makes the demo as it starts
    env = {**os.environ, "PXP_DATABASE_URL": url, "PXP_DEMO_FILMS": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with app_page(env, tmp_path) as (page, base):
        t0 = time.monotonic()
        page.goto(base)
        # the first text the page draws is already first start's: what it makes, with a progress bar (drawn before
        # the app's imports and the database's tables)
        first = page.wait_for_function(  # (the page's title comes first: the first text after it)
            """(title) => { const m = document.querySelector('[data-testid="stMain"]');
                            const t = m ? m.innerText.replace(title, "").trim() : "";
                            return t ? t : null; }""",
            arg=FIRST_START_TITLE, polling=20, timeout=30_000).json_value()
        assert "First start: pxp is making its demo" in first, first
        page.wait_for_function(
            """() => document.body.innerText.includes("Making ")
                     && !!document.querySelector('[data-testid="stProgress"]')""", polling=20, timeout=30_000)
        at_once = time.monotonic() - t0
        # read at one moment: the line saying what is being made, and its step (it moves on meanwhile)
        line = page.wait_for_function(
            r"""() => { const t = document.body.innerText;
                        const m = t.match(/Making .+ \([1-4] of 4\)/);
                        return t.includes("First start: pxp is making its demo") && m ? m[0] : null; }""",
            timeout=30_000).json_value()
        drawn = time.monotonic() - t0
        assert any(what in line for what in ("demo-rad", "demo-drug")), line
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "first_start.png"))
        # then Home, in its place
        expect(page.get_by_text("Start annotating")).to_be_visible(timeout=120_000)
        expect(page.get_by_text("First start: pxp is making its demo")).to_have_count(0)
        ready = time.monotonic() - t0
        expect(page.get_by_role("heading", name="Datasets")).to_be_visible(timeout=10_000)
        print(f"first start: first text (what is made, a bar) after {at_once:.2f} s, its steps after {drawn:.2f} s, "
              f"Home after {ready:.2f} s")


#: from the moment it is run: what the page showed when the first drawing (a molecule) appeared in a case card: the
#: number of cards (each has its "Reference answer") and whether a line said how many cases are being drawn (when the
#: drawings come in the same update as the cards, there was nothing to wait for and no line)
FIRST_DRAWING = """() => { window.__pxpFirst = null;
  const seen = () => { if (window.__pxpFirst) return;
    const main = document.querySelector('[data-testid="stMain"]');
    if (!main || !main.querySelector('[data-testid="stImage"]')) return;
    const text = main.innerText;
    window.__pxpFirst = [text.split("Reference answer").length - 1, /Drawing \\d+ cases…/.test(text)]; };
  new MutationObserver(seen).observe(document.body, {childList: true, subtree: true}); }"""


def test_the_datasets_page_says_what_it_draws_and_shows_every_card_at_once(tmp_path: Path) -> None:
    """Browsing a DRUG dataset, every case card of the page (its name and reference answer) is on the page before
    the first molecule is drawn; once all are drawn, no line says cases are being drawn."""
    from playwright.sync_api import expect

    from pxp.running.pxp.controlled.demo import ensure_demo
    from pxp.storage.store import get_engine

    _need_chromium()
    url = f"sqlite:///{tmp_path / 'datasets.db'}"
    ensure_demo(get_engine(url))
    env = {**os.environ, "PXP_DATABASE_URL": url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with app_page(env, tmp_path) as (page, base):
        page.goto(f"{base}/datasets")
        browse = page.get_by_label("Browse")
        expect(browse).to_be_visible(timeout=90_000)
        for name in ("demo-rad", "demo-drug"):  # (whichever is shown first) the DRUG set is chosen, watched
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=90_000)
            if name == "demo-drug":
                page.evaluate(FIRST_DRAWING)
            browse.click()
            page.get_by_role("option", name=name, exact=True).click()
        cards, said = page.wait_for_function("() => window.__pxpFirst", timeout=90_000).json_value()
        expect(page.get_by_text("Drawing the molecule…")).to_have_count(0, timeout=90_000)
        assert cards == 12, (cards, said)
        expect(page.get_by_text("Reference answer")).to_have_count(12)
        expect(page.get_by_text(re.compile(r"Drawing \d+ cases…"))).to_have_count(0)
