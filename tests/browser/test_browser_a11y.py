"""Every page and state of pxp audited with axe-core (tests/browser/axe.py) at 1280×720 and 1920×1080, in one
app start (docs/accessibility.md): Home, Sessions (the list, a RAD and a DRUG transcript), Experiments, every
Analytics view, every Scorekeeping tab and a game being played, Datasets, Settings, Audit, and Annotate: RAD,
and DRUG with the molecule editor closed and open. (The login screens are audited in test_browser_auth.)
Then the keyboard-only paths this app start also serves, each asserting where the focus is: the film's
window presets, its full view and back, and I agree (Alt+A); the molecule editor opened (Alt+M), closed (Esc)
and applied. (Reply and Send by keyboard: test_browser_app; Draw, Apply and Send: test_browser_chem.)
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote_plus

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app.scorekeeping import TABS
from pxp.app.views.analytics_common import VIEWS
from pxp.storage.store import get_engine
from pxp.storage.tables import Dataset, Instance, Session
from tests.browser.axe import SIZES, audit, painted
from tests.browser.test_browser_app import _annotate_as, _idle, _session, launch, need_chromium, serving

pytestmark = pytest.mark.browser



@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """One app on the demo data for the whole module."""
    need_chromium()
    tmp = tmp_path_factory.mktemp("a11y")
    url = f"sqlite:///{tmp / 'a11y.db'}"
    from pxp.running.pxp.controlled.demo import ensure_demo

    ensure_demo(get_engine(url))
    with serving(url, tmp) as base:
        yield base, url


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=90_000)
    _idle(page)
    painted(page)


def _audit(page: Any, where: str, found: list[str]) -> None:
    found += audit(page, where)


def _finished_session(url: str, dataset: str) -> int:
    """A finished session of the demo's simulated experiment on `dataset`."""
    with DB(get_engine(url)) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == dataset)).one()
        sid = db.exec(select(Session.id).join(Instance, Instance.id == Session.instance_id)  # type: ignore[arg-type]
                      .where(Instance.dataset_id == ds.id, Session.status == "finished")).first()
    assert sid is not None
    return int(sid)


def test_every_page_and_state_has_no_serious_violation(demo_server: tuple[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, url = demo_server
    found: list[str] = []
    started = time.monotonic()
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport=SIZES[0])
            plain = ["", "sessions", "experiments", "datasets", "settings", "audit"]
            plain += [f"sessions?session={_finished_session(url, d)}" for d in ("demo-rad", "demo-drug")]
            for path in plain:
                _open(page, f"{base}/{path}")
                _audit(page, path or "home", found)
            # the views and tabs within their page, as a user goes from one to the next (no page load)
            _open(page, f"{base}/analytics")
            for view in VIEWS:
                page.locator(".st-key-analytics_view").get_by_text(view, exact=True).click()
                expect(page).to_have_url(re.compile(r"view=" + re.escape(quote_plus(view)) + "(&|$)"))
                _idle(page)
                painted(page)
                _audit(page, f"analytics, {view}", found)
            _open(page, f"{base}/scorekeeping")
            for tab in TABS:
                page.get_by_role("tab", name=tab).click()
                expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
                _idle(page)
                painted(page)
                _audit(page, f"scorekeeping, {tab}", found)
            # a scorekeeping game being played
            name = page.get_by_label("Your name")
            name.fill("Dr Audit")
            name.press("Enter")
            _idle(page)
            page.locator(".st-key-sk_play_start button").click()
            _idle(page)
            painted(page)
            _audit(page, "scorekeeping play", found)

            _annotate_as(page, base, "Dr Audit", "demo-rad (rad)")
            page.wait_for_selector("[data-pxp-viewer][data-drawn]", timeout=90_000)
            _audit(page, "annotate RAD", found)
            _annotate_as(page, base, "Dr Audit", "demo-drug (drug)")
            expect(page.get_by_text("The machine's proposed step", exact=False).first).to_be_visible()
            _session(url, "Dr Audit", page)
            _idle(page)
            _audit(page, "annotate DRUG", found)
            from tests.browser.test_browser_chem import open_editor

            open_editor(page)
            _audit(page, "annotate DRUG, the editor open", found)
        finally:
            browser.close()
    print(f"the audit of every page and state took {time.monotonic() - started:.0f} s")
    assert found == [], "\n".join(found)


#: where the focus is, through the film's shadow root and same-origin frames: the element's tag, name and
#: text, whether it is in a frame, and whether it is the film itself
DEEP = """() => { let e = document.activeElement, inFrame = false;
  for (;;) {
    if (e && e.shadowRoot && e.shadowRoot.activeElement) { e = e.shadowRoot.activeElement; continue; }
    if (e && e.tagName === 'IFRAME' && e.contentDocument && e.contentDocument.activeElement) {
      inFrame = true; e = e.contentDocument.activeElement; continue; }
    break;
  }
  if (!e) return null;
  return {tag: e.tagName, label: e.getAttribute('aria-label') || '', text: (e.textContent || '').trim().slice(0, 40),
          frame: inFrame, film: !!(e.classList && e.classList.contains('pxp-wl'))}; }"""
#: what the film's live region says (its window/level in words)
SAID = "() => window.__pxpFilm ? window.__pxpFilm.querySelector('.pxp-said').textContent : null"


def _focus(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(DEEP) or {})


def _tab_until(page: Any, key: str, want: Any, most: int = 8) -> dict[str, Any]:
    """Press `key` until the focus is where want(focus) says (at most `most` times)."""
    for _ in range(most):
        page.keyboard.press(key)
        now = _focus(page)
        if want(now):
            return now
    raise AssertionError(f"{key} never reached it: the focus is on {_focus(page)}")


def _wait_focus(page: Any, want: Any, deadline_s: float = 30) -> dict[str, Any]:
    end = time.monotonic() + deadline_s
    while not want(now := _focus(page)):
        assert time.monotonic() < end, f"the focus is on {now}"
        time.sleep(0.05)
    return now


def test_the_film_and_i_agree_by_keyboard(demo_server: tuple[str, str]) -> None:
    """Shift+Tab from the reply form reaches the film's presets; a preset by Enter puts the focus on the film and
    its window in words in the live region; I inverts, F shows the full view and Esc returns, the focus on the
    film throughout; Tab goes back into the reply form; Alt+A agrees and the next reply form has the focus."""
    from playwright.sync_api import sync_playwright

    base, url = demo_server
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport=SIZES[0])
            _annotate_as(page, base, "Dr Keys", "demo-rad (rad)")
            sid, _, _ = _session(url, "Dr Keys", page)
            page.reload()  # (a dataset just picked keeps the focus in its picker) the page's reply form has it
            page.wait_for_selector("[data-pxp-viewer][data-drawn]", timeout=90_000)
            form = f".st-key-annotate_form_{sid}_2"
            page.wait_for_function(f"() => !!document.activeElement.closest('{form}')", timeout=60_000)
            assert _focus(page)["label"] == "My prediction"
            said = page.evaluate(SAID)
            assert said.startswith("Window ") and ", level " in said, said

            _tab_until(page, "Shift+Tab", lambda f: f["tag"] == "BUTTON" and f["text"] == "Invert")
            page.keyboard.press("Enter")
            assert _wait_focus(page, lambda f: f["film"])["label"] == "Radiograph of the case"
            page.wait_for_function("() => (" + SAID + ")().endsWith(', inverted')", timeout=10_000)
            page.keyboard.press("i")
            page.wait_for_function("() => !(" + SAID + ")().includes('inverted')", timeout=10_000)
            before = page.evaluate(SAID)
            _tab_until(page, "Tab", lambda f: f["tag"] == "BUTTON" and f["text"] == "Full range")
            page.keyboard.press("Enter")
            assert _wait_focus(page, lambda f: f["film"])["film"]
            page.wait_for_function("() => (" + SAID + f")() !== {before!r}", timeout=10_000)
            page.keyboard.press("f")
            page.wait_for_function("() => window.__pxpFilm.classList.contains('pxp-full')", timeout=10_000)
            assert _focus(page)["film"] and "full screen" in page.evaluate(SAID)
            page.keyboard.press("Escape")
            page.wait_for_function("() => !window.__pxpFilm.classList.contains('pxp-full')", timeout=10_000)
            assert _focus(page)["film"]

            _tab_until(page, "Tab", lambda f: f["label"] == "My prediction")
            assert page.evaluate(f"() => !!document.activeElement.closest('{form}')")
            page.keyboard.press("Alt+A")  # I agree with the machine: its answer, sent as RATIFY
            page.wait_for_function(
                """(old) => { const f = document.activeElement.closest('[class*="st-key-annotate_form_"]');
                   return !!f && ![...f.classList].includes(old); }""", arg=form[1:], timeout=90_000)
        finally:
            browser.close()


def test_the_molecule_editor_by_keyboard(demo_server: tuple[str, str]) -> None:
    """Alt+M from the reactant field opens the editor with the focus on its Close button, Tab goes into Ketcher
    (the page under it is inert), Esc in Ketcher and Esc on Close close it, Enter on Apply applies: each time the
    focus is back in the reactant field."""
    from playwright.sync_api import expect, sync_playwright

    from tests.browser.test_browser_chem import READY, SHOWN, SMILES_LABEL, editor_frame, same, smiles_in, until

    base, url = demo_server
    field_has_focus = lambda f: f["label"] == SMILES_LABEL and not f["frame"]  # noqa: E731
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport=SIZES[0])
            _annotate_as(page, base, "Dr Chem Keys", "demo-drug (drug)")
            _session(url, "Dr Chem Keys", page)
            _wait_focus(page, field_has_focus, 60)
            until(lambda: editor_frame(page) is not None)
            closed = "() => !(" + SHOWN + ")()"
            for how in ("Esc in Ketcher", "Esc on Close"):
                page.keyboard.press("Alt+M")
                page.wait_for_function(SHOWN, timeout=90_000)
                assert _wait_focus(page, lambda f: f["tag"] == "BUTTON" and "Close" in f["text"])
                if how == "Esc in Ketcher":
                    now = _tab_until(page, "Tab", lambda f: f["frame"], 3)  # into Ketcher, not the page under it
                    assert now["frame"], now
                page.keyboard.press("Escape")
                page.wait_for_function(closed, timeout=90_000)
                _wait_focus(page, field_has_focus)
            page.keyboard.press("Alt+M")
            page.wait_for_function(SHOWN, timeout=90_000)
            until(lambda: editor_frame(page) is not None)
            frame = editor_frame(page)
            frame.wait_for_function(READY, timeout=90_000)
            frame.evaluate("async () => { await window.ketcher.setMolecule('CCO.OC(=O)c1ccccc1'); }")
            until(lambda: same(smiles_in(frame), "CCO.O=C(O)c1ccccc1"))
            frame.get_by_role("button", name="Apply").focus()
            page.keyboard.press("Enter")
            page.wait_for_function(closed, timeout=90_000)
            field = page.get_by_label(SMILES_LABEL).last
            until(lambda: same(field.input_value(), "CCO.O=C(O)c1ccccc1"))
            _wait_focus(page, field_has_focus)
            expect(page.get_by_text("Canonical form:")).to_be_visible()
        finally:
            browser.close()
