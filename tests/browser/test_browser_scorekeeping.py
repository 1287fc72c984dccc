"""Play as the answerer in a real browser (docs/research.md, Scorekeeping game): Playwright driving Debian's chromium
against
`streamlit run` (the server and browser helpers of test_browser_app). One scorekeeping episode is played
to the end by keyboard only, with a reload in the middle; it lands on the leaderboard as human:<name>."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, select

from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer
from pxp.running.scorekeeping import play
from pxp.running.scorekeeping.play import Play
from pxp.storage.scorekeeping import SkEpisode
from pxp.storage.store import get_engine
from tests.browser.test_browser_app import ARTIFACTS, _idle, launch, pytestmark, server  # noqa: F401

WHO = "Kim Keys"
MODEL = play.HUMAN_PREFIX + WHO
CAREFUL = SimulatedAnswerer(probe_accuracy=1.0, slot_accuracy=1.0, format_error_rate=0.0)


def _wait_step(engine: Engine, step: int) -> Play | None:
    """The episode once `step` replies are stored (None: it is finished; step 0: started)."""
    deadline = time.monotonic() + 120  # generous: the app stores the reply in its own script run
    while time.monotonic() < deadline:
        p = play.current(engine, MODEL)
        if (p is None and step > 0) or (p is not None and p.step >= step):
            return p
        time.sleep(0.1)
    raise AssertionError(f"reply {step} was not stored")


def _reply_by_keyboard(page: Any, p: Play) -> None:
    """The right reply by keys only: Alt+Y / Alt+N for a probe; for an answer the focused field already
    holds the tag, so End, the words, Enter."""
    reply = CAREFUL(p.request)
    if p.request.kind == "probe":
        page.wait_for_selector(f".st-key-sk_play_yes_{p.step} button", timeout=90_000)
        _idle(page)
        page.keyboard.press("Alt+Y" if "Yes" in reply else "Alt+N")
    else:
        page.wait_for_selector(f".st-key-sk_play_reply_{p.step} input", timeout=90_000)
        _idle(page)
        page.wait_for_function(  # bring_into_view focused the reply field
            f"() => document.activeElement?.tagName === 'INPUT'"
            f" && !!document.activeElement.closest('.st-key-sk_play_reply_{p.step}')",
            timeout=60_000)
        page.keyboard.press("End")
        page.keyboard.type(reply.removeprefix("ANSWER: "))
        page.keyboard.press("Enter")


def test_one_episode_by_keyboard_with_a_reload(server: tuple[str, str]) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    engine = get_engine(url)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/scorekeeping?sk_tab=Play+as+the+answerer")
            name = page.get_by_label("Your name")
            expect(name).to_be_visible(timeout=90_000)
            name.focus()
            page.keyboard.type(WHO)
            page.keyboard.press("Enter")
            _idle(page)
            # the Start button takes the focus: Enter starts the episode
            page.wait_for_function(
                "() => !!document.activeElement && !!document.activeElement.closest('.st-key-sk_play_start')",
                timeout=60_000)
            page.keyboard.press("Enter")
            p = _wait_step(engine, 0)
            assert p is not None and p.step == 0
            replies = 0
            while p is not None:
                _reply_by_keyboard(page, p)
                replies += 1
                try:
                    p = _wait_step(engine, replies)
                except AssertionError:
                    page.screenshot(path=str(ARTIFACTS / "sk-debug.png"), full_page=True)
                    print(page.evaluate("() => document.activeElement && document.activeElement.outerHTML"))
                    raise
                if replies == 12:  # mid-episode: the page comes back where it was (a probe, Yes focused)
                    page.reload()
                    expect(page.get_by_label("Your name")).to_have_value(WHO, timeout=90_000)
                    assert p is not None and p.request.kind == "probe"
                    page.wait_for_function(
                        "() => !!document.activeElement?.closest('.st-key-sk_play_yes_12')", timeout=90_000)
                    page.screenshot(path=str(ARTIFACTS / "scorekeeping-play.png"))
            expect(page.get_by_text("it is on the leaderboard", exact=False)).to_be_visible(timeout=90_000)
            _idle(page)
            page.screenshot(path=str(ARTIFACTS / "scorekeeping-play-finished.png"))
            page.get_by_role("tab", name="Leaderboard").click()
            _idle(page)
            expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible(timeout=90_000)
        finally:
            browser.close()
    assert replies == 35
    with engine.connect() as c:
        table = SkEpisode.__table__  # type: ignore[attr-defined]
        ep = c.execute(select(table).where(table.c.model == MODEL)).mappings().one()
    assert ep["main_score"] == 100.0 and not ep["aborted"]
