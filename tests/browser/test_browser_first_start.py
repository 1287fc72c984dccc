"""Pages that wait say what for, in a real browser at 1280×720. First start (docs/operations.md, First start): on a
fresh database the page is drawn at once, says what is being made and shows its progress, then Home replaces it
when the demo is ready."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.browser.test_browser_app import ARTIFACTS, app_page
from tests.browser.test_browser_fail_closed import _need_chromium

pytestmark = pytest.mark.browser


def test_a_fresh_database_shows_what_is_being_made_then_home(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    _need_chromium()
    url = f"sqlite:///{tmp_path / 'fresh.db'}"  # nothing in it: the first visit makes the demo
    env = {**os.environ, "PXP_DATABASE_URL": url, "PXP_DEMO_FILMS": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with app_page(env, tmp_path) as (page, base):
        t0 = time.monotonic()
        page.goto(base)
        # the first text the page draws is already first start's: what it makes, with a progress bar (drawn before
        # the app's imports and the database's tables)
        first = page.wait_for_function(
            """() => { const m = document.querySelector('[data-testid="stMain"]');
                       return m && m.innerText.trim() ? m.innerText.trim() : null; }""",
            polling=20, timeout=30_000).json_value()
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

