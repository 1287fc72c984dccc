"""Every chord works at once after a case appears (docs/annotating.md, Keys): pressed the moment a new case's
header is in the page, also while the case is still loading (its machine still answering, no reply form yet),
a chord is performed once, on that case's form, and the keyboard is where it should be: a typed character
lands in the focused field. Each path is repeated case after case, so that a chord dropped now and then shows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_browser_app import _idle, _session, held_machine, launch, need_chromium, serving
from tests.browser.test_browser_chem import SHOWN, SMILES_LABEL

pytestmark = pytest.mark.browser

#: cases per path: a chord dropped one time in four or five (as reported) shows within them
CASES = 10
#: the newest case header's session id (null: none yet)
CASE = """() => { const k = [...document.querySelectorAll('[class*="st-key-annotate_case_"]')]
    .flatMap((e) => [...e.classList]).filter((x) => /^st-key-annotate_case_[0-9]+$/.test(x)).pop();
  return k ? Number(k.slice("st-key-annotate_case_".length)) : null; }"""
#: resolves, at the first change of the page that shows a case header other than `old`, with its session id and
#: whether that case's reply form is in the page yet (so the chord is pressed in the very moment it appears)
NEW_CASE = """(old) => new Promise((done, fail) => {
  const now = """ + CASE + """;
  const check = () => { const n = now();
    if (n === null || n === old) return false;
    o.disconnect(); done([n, !!document.querySelector(`[class*="st-key-annotate_form_${n}_"]`)]); return true; };
  const o = new MutationObserver(check);
  o.observe(document.body, {childList: true, subtree: true, attributes: true});
  if (!check()) setTimeout(() => { o.disconnect(); fail(new Error("no new case in 90 s")); }, 90000);
})"""
#: the Yes of "Its explanation agrees with mine?" (Alt+7) is chosen on the reply form of session `sid`
AGREED = """(sid) => {
  const b = [...document.querySelectorAll(`[class*="st-key-annotate_${sid}_"][class*="_agree_yes"] button`)].pop();
  return !!b && b.getAttribute("kind") === "primary"; }"""
#: records, from when it is run, where the focus goes and why (each focus change and key, with its time in ms), so
#: that a failure says what took the focus
FOCUS_LOG = """() => { if (window.__pxpFocusLog) return; const log = window.__pxpFocusLog = [], t0 = performance.now();
  const name = (e) => e ? e.tagName + (e.getAttribute && e.getAttribute("aria-label")
    ? ":" + e.getAttribute("aria-label") : "") + (e.isConnected === false ? " (removed)" : "") : "none";
  const at = () => Math.round(performance.now() - t0);
  document.addEventListener("focusin", (e) => log.push([at(), "focus", name(e.target)]), true);
  document.addEventListener("focusout", (e) => setTimeout(() => log.push([at(), "blur", name(e.target),
                                                                          name(e.relatedTarget)]), 0), true);
  document.addEventListener("keydown", (e) => log.push([at(), "key", e.code, name(document.activeElement)]), true);
}"""
#: the focused element's accessible name and the reply form it is in
FOCUS = """() => { const e = document.activeElement, f = e && e.closest('[class*="st-key-annotate_form_"]');
  return [e ? (e.getAttribute("aria-label") || (e.textContent || "").trim()) : null,
          f ? [...f.classList].find((c) => c.startsWith("st-key-annotate_form_")) : null]; }"""


#: resolves with ["form"] once a later reply form of case `sid` than `j` is in the page and the page is idle (the
#: case goes on), or as NEW_CASE does with ["case", its session id, whether its form is there]
NEXT = """([sid, j]) => Promise.race([(""" + NEW_CASE + """)(sid).then((r) => ["case", ...r]),
  new Promise((done) => { const t = setInterval(() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const later = [...document.querySelectorAll(`[class*="st-key-annotate_form_${sid}_"]`)].some((f) =>
      [...f.classList].some((c) => c.startsWith(`st-key-annotate_form_${sid}_`) && Number(c.split("_").pop()) > j));
    if (later && app.getAttribute("data-test-script-state") === "notRunning") { clearInterval(t); done(["form"]); }
  }, 20); })])"""
#: the newest reply form's message number
FORM_J = """() => { const f = [...document.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
  const k = f && [...f.classList].find((c) => c.startsWith("st-key-annotate_form_"));
  return k ? Number(k.split("_").pop()) : 0; }"""


def _end_case(page: Any, sid: int) -> tuple[int, bool]:
    """Agree (Alt+A) on each reply form of case `sid` until another case's header is in the page; (its session
    id, whether its reply form was there in that first moment), returned at the very change that shows it."""
    for _ in range(20):
        j = page.evaluate(FORM_J)
        page.evaluate("(a) => { window.__pxpNext = (" + NEXT + ")(a); }", [sid, j])  # armed before the key
        page.keyboard.press("Alt+A")
        out = page.evaluate("() => window.__pxpNext")
        if out[0] == "case":
            return int(out[1]), bool(out[2])
        _idle(page)  # the case goes on: the machine answered; agree again
    raise AssertionError(f"case {sid} never ended")


def _typed_lands(page: Any, char: str) -> str:
    """Type one character into the focused field; the field's value once the page is idle."""
    page.keyboard.type(char)
    _idle(page)
    return str(page.evaluate("() => document.activeElement && document.activeElement.value"))


@contextlib.contextmanager
def _annotating(base: str, url: str, who: str, role: str, dataset: str) -> Iterator[tuple[Any, int]]:
    """A 1280×720 page of the Annotate page for `who` on `dataset`, its first session begun: (page, session id)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"{base}/annotate?annotator={who.replace(' ', '+')}&role={role}&dataset={dataset}")
            sid, _, _ = _session(url, who, page)
            _idle(page)
            yield page, sid
        finally:
            browser.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The app on the demo data (its cases prepared ahead, as an expert meets them)."""
    need_chromium()
    tmp = tmp_path_factory.mktemp("keys")
    url = f"sqlite:///{tmp / 'keys.db'}"
    from pxp.running.pxp.controlled.demo import ensure_demo
    from pxp.storage.store import get_engine

    ensure_demo(get_engine(url))
    with serving(url, tmp) as base:
        yield base, url


def test_alt_m_as_each_drug_case_appears_opens_the_editor_once(demo: tuple[str, str]) -> None:
    """Alt+M pressed in the first moment each new DRUG case is in the page opens the molecule editor, without a
    second press, with the focus on its Close button; it opens once (closed, it stays closed); Esc gives the
    keyboard back to the reactant field, where a typed character lands."""
    base, url = demo
    with _annotating(base, url, "Dr Chord", "Chemist", "demo-drug") as (page, sid):
        for n in range(CASES):
            sid, _ = _end_case(page, sid)
            page.keyboard.press("Alt+M")
            page.wait_for_function(SHOWN, timeout=30_000)  # no second press
            page.wait_for_function("() => document.activeElement.closest('.st-key-annotate_editor_close')",
                                   timeout=10_000)
            _idle(page)
            page.keyboard.press("Escape")
            page.wait_for_function("() => !(" + SHOWN + ")()", timeout=30_000)
            page.wait_for_function(f"() => document.activeElement.getAttribute('aria-label') === {SMILES_LABEL!r}",
                                   timeout=10_000)
            label, form = page.evaluate(FOCUS)
            assert form is not None and form.startswith(f"st-key-annotate_form_{sid}_"), (n, label, form)
            assert _typed_lands(page, "C") == "C", f"case {n + 1}: the typed character was lost"
            page.wait_for_timeout(300)
            assert not page.evaluate(SHOWN), f"case {n + 1}: Alt+M was performed twice"


def test_alt_7_as_each_rad_case_appears_answers_its_form(demo: tuple[str, str]) -> None:
    """Alt+7 (the explanation agrees: Yes) pressed in the first moment each new RAD case is in the page answers
    that case's first reply form, whose prediction keeps the focus; a typed character lands in it."""
    base, url = demo
    with _annotating(base, url, "Dr Seven", "Radiologist", "demo-rad") as (page, sid):
        page.evaluate(FOCUS_LOG)
        for n in range(CASES):
            sid, _ = _end_case(page, sid)
            page.keyboard.press("Alt+7")
            page.wait_for_function(AGREED, arg=sid, timeout=30_000)
            _idle(page)
            label, form = page.evaluate(FOCUS)
            assert (label, form) == ("My prediction", f"st-key-annotate_form_{sid}_2"), (
                n, label[:40], form, page.evaluate("() => window.__pxpFocusLog.slice(-14)"))
            assert _typed_lands(page, "P") == "P", f"case {n + 1}: the typed character was lost"
            page.keyboard.press("Escape")  # the picker's list closed, its filter left
            _idle(page)


@pytest.fixture
def loading(tmp_path: Path) -> Iterator[tuple[str, threading.Event]]:
    """The app on a live RAD experiment with small films, nothing prepared ahead, whose LLM machine (the local
    wire-format server) gives each case's opening message only once the test lets it: each new case is in the
    page (its header and film) while its machine still answers, without a reply form."""
    need_chromium()
    # a case's opening message (the case alone) is held until the test lets it go
    with held_machine(tmp_path, per_label=3, size=(600, 500), holds=lambda req: len(req.texts()) == 1) as held:
        yield held


def test_a_chord_pressed_while_the_case_loads_is_performed(loading: tuple[str, threading.Event]) -> None:
    """Alt+7 pressed as each case appears, while its machine is still answering (no reply form yet), is held and
    performed on that case's form when it comes, the focus in it and a typed character landing there."""
    from playwright.sync_api import sync_playwright

    base, go = loading
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            sid = None
            for n in range(CASES):
                go.clear()
                if sid is None:  # the page's first case
                    page.goto(f"{base}/annotate?annotator=Dr+Early&role=Radiologist&dataset=films")
                    page.evaluate(FOCUS_LOG)
                    sid, has_form = page.evaluate(NEW_CASE, None)
                    # a key can be held only once the page's key script has loaded (its frame, first in the
                    # sidebar, loads beside the case; on a loaded machine it can come after the case's header)
                    page.wait_for_function("() => !!window.__pxpTabOrder", timeout=30_000)
                else:
                    sid, has_form = _end_case(page, sid)
                page.keyboard.press("Alt+7")
                assert not has_form, "the case was to appear before its reply form"
                page.wait_for_timeout(200)  # the machine answers a moment after the key
                go.set()
                try:
                    page.wait_for_function(AGREED, arg=sid, timeout=30_000)
                except Exception:
                    raise AssertionError(f"case {n + 1}: Alt+7 was not performed; the focus and keys: "
                                         f"{page.evaluate('() => window.__pxpFocusLog.slice(-14)')}") from None
                _idle(page)
                label, form = page.evaluate(FOCUS)
                assert (label, form) == ("My prediction", f"st-key-annotate_form_{sid}_2"), (
                    n, label[:40], form, page.evaluate("() => window.__pxpFocusLog.slice(-14)"))
                assert _typed_lands(page, "P") == "P", f"case {n + 1}: the typed character was lost"
                page.keyboard.press("Escape")
                _idle(page)
        finally:
            browser.close()
