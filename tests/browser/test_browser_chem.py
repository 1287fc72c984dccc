"""The chemist's workstation in a real browser at 1280×720 (docs/annotating.md, "Drawing the reactants").

On a demo DRUG case: Ketcher (the app's light copy of its build, pxp.app.annotate.ketcher) is loaded
in the background before the chemist opens the editor, and takes no focus while hidden; opened
(Alt+M), it covers the window, its canvas at least 70% of the window's height and both side toolbars
whole; its Salts and Solvents tab draws its pictures when opened; Esc closes it; a molecule set
through Ketcher's own API and its Apply button (Indigo's SMILES) fill the reactant SMILES field, which
Send stores as the human's prediction; the human's proposed step is then drawn
like the machine's; every reaction drawing stays inside its column, on Annotate and on Sessions. (The
time to open is measured in bench/bench_browser.py, not here.)
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pxp.app.annotate.editor import BOX, DRAW_KEY
from pxp.data.chem import InvalidSmiles, smiles_set
from tests.browser.test_browser_app import (
    _annotate_as,
    _idle,
    _keys,
    _session,
    _session_of,
    launch,
    server,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.browser

SMILES_LABEL = "My prediction: reactant SMILES (separate with a dot)"
KETCHER_URL = "/component/pxp.app.annotate.ketcher.ketcher/"
#: the Ketcher instance of the editor's frame, as `window.ketcher` (the component keeps it in React
#: state only): found among the hooks' states of its React tree on screen by its API
FIND_KETCHER = """() => {
  if (window.ketcher) return true;
  const root = document.getElementById('root');
  const k = root && Object.keys(root).find((k) => k.startsWith('__reactContainer') || k === '_reactRootContainer');
  if (!k) return false;
  const fiberRoot = k === '_reactRootContainer' ? root[k]._internalRoot : root[k].stateNode;
  const stack = [fiberRoot.current];  // the tree on screen, not its alternate
  while (stack.length) {
    const f = stack.pop();
    if (!f) continue;
    for (let s = f.memoizedState; s && typeof s === 'object' && 'next' in s; s = s.next) {
      const v = s.memoizedState;
      if (v && typeof v.setMolecule === 'function' && typeof v.getSmiles === 'function') {
        window.ketcher = v;
        return true;
      }
    }
    stack.push(f.child, f.sibling);
  }
  return false;
}"""
#: the editor's box is shown over the window (it is hidden, off screen, until Draw)
SHOWN = """() => { const b = document.querySelector('.st-key-""" + BOX + """');
  if (!b) return false; const r = b.getBoundingClientRect();
  return r.left >= 0 && r.width > 0 && getComputedStyle(b).visibility === 'visible'; }"""
#: in the editor's frame: Ketcher is up (its "Loading..." gone) and found
READY = "() => !document.querySelector('[data-testid=\"loading-placeholder\"]') && (" + FIND_KETCHER + ")()"
#: in the editor's frame: the canvas' height, and each side toolbar's [top, bottom, content height, height,
#: its scroll arrows shown]
FIT = """() => { const q = (s) => document.querySelector(s);
  const bar = (s) => { const e = q(s), r = e.getBoundingClientRect();
    return [r.top, r.bottom, e.scrollHeight, e.clientHeight,
            [...e.parentElement.querySelectorAll('*')].filter((x) => !x.children.length && x.textContent.trim() === '▼'
              && x.getBoundingClientRect().height > 0).length]; };
  return {canvas: q('[class*="StructEditor"]').getBoundingClientRect().height, frameH: innerHeight,
          left: bar('[class*="LeftToolbar"]'), right: bar('[class*="RightToolbar"]')}; }"""
#: in the editor's frame: at least `n` structure pictures drawn in the library dialog's tab on screen
PICTURES = """(n) => [...document.querySelectorAll('[role=tabpanel] svg')]
  .filter((s) => s.querySelector('path') && s.getBoundingClientRect().height > 0).length >= n"""
#: every drawn image (molecules, reaction pieces) that sticks out of its column: [left, right, column]
OVERFLOW = """() => [...document.querySelectorAll('[data-testid="stImage"] img, [data-testid="stImageContainer"] img')]
  .map((i) => [i.getBoundingClientRect(), i.closest('[data-testid="stColumn"]')])
  .filter(([r, c]) => r.width > 0 && c)
  .map(([r, c]) => [r.left, r.right, c.getBoundingClientRect()])
  .filter(([l, r, c]) => l < c.left - 0.5 || r > c.right + 0.5)
  .map(([l, r, c]) => [Math.round(l), Math.round(r), [Math.round(c.left), Math.round(c.right)]])"""


def open_editor(page: Any, draw_key: str | None = None) -> Any:
    """Press Draw (the button keyed `draw_key`, else its key chord); the editor's frame once Ketcher in
    it is ready."""
    if draw_key:
        page.locator(f".st-key-{draw_key}").get_by_role("button", name="Draw").click()
    else:
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press(DRAW_KEY)
    page.wait_for_function(SHOWN, timeout=90_000)
    until(lambda: editor_frame(page) is not None)
    frame = editor_frame(page)
    assert frame is not None, "the editor's frame"
    frame.wait_for_function(READY, timeout=90_000)
    return frame


def editor_frame(page: Any) -> Any:
    """The Ketcher frame in the editor's box (a new pre-fill makes a new one), if any: found by its
    element (the page's list of frames can hold a re-created frame under an empty URL)."""
    for el in page.locator(f'.st-key-{BOX} iframe[src*="{KETCHER_URL}"]').element_handles():
        frame = el.content_frame()
        if frame is not None and not frame.is_detached():
            return frame
    return None


def smiles_in(frame: Any) -> str:
    """The SMILES of the molecules on Ketcher's canvas."""
    return str(frame.evaluate("async () => await window.ketcher.getSmiles()"))


def same(a: str, b: str) -> bool:
    """Whether two reactant SMILES are the same molecules (RDKit's canonical sets)."""
    try:
        return smiles_set(a) == smiles_set(b)
    except InvalidSmiles:
        return False


def until(what: Any, deadline_s: float = 90) -> None:
    """Wait (polling) until what() is true."""
    import time

    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, "not in time"
        time.sleep(0.1)


def test_draw_apply_and_send_the_reactants(server: tuple[str, str]) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    who = "Dr Draw"
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.on("request", lambda r: requests.append(r.url))
            _annotate_as(page, base, who, "demo-drug (drug)")
            expect(page.get_by_text("The machine's proposed step", exact=False).first).to_be_visible()
            sid, msgs, _ = _session(url, who, page)
            _idle(page)
            assert not page.evaluate(OVERFLOW), page.evaluate(OVERFLOW)
            # Tab goes from the reactants to the explanation: the Draw button takes no Tab stop there
            smiles = page.get_by_label(SMILES_LABEL).last
            smiles.focus()
            page.keyboard.press("Tab")
            assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "My explanation"
            # the editor is loaded in the background once the case is on screen, hidden: it takes
            # neither the focus (Ketcher focuses itself as it starts) nor the page's keys
            until(lambda: any(".chunk.js" in u for u in requests if KETCHER_URL in u))
            assert not page.evaluate(SHOWN)
            until(lambda: editor_frame(page) is not None)
            editor_frame(page).wait_for_function(READY, timeout=90_000)
            assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "My explanation"
            assert page.evaluate(f"() => document.querySelector('.st-key-{BOX}').inert")

            frame = open_editor(page)  # Alt+M: over the whole window, every toolbar whole
            until(lambda: frame.evaluate(FIT)["frameH"] >= 600, 10)  # fitted to the window
            fit = frame.evaluate(FIT)
            assert fit["canvas"] >= 0.7 * 720, fit
            for side in ("left", "right"):
                _, bottom, content, height, arrows = fit[side]
                assert content <= height + 1 and not arrows and bottom <= fit["frameH"], (side, fit)
            box = page.evaluate(f"() => document.querySelector('.st-key-{BOX}').getBoundingClientRect().toJSON()")
            assert box["top"] <= 1 and box["height"] >= 719 and box["width"] >= 1279, box
            until(lambda: same(smiles_in(frame), msgs[0].prediction))  # pre-filled with the machine's
            page.screenshot(path="artifacts/annotate-1280x720-ketcher.png")
            # the Salts and Solvents tab draws its pictures when opened (none are drawn as Ketcher starts)
            frame.locator('[title="Custom Templates (Shift+T)"]').click()
            frame.get_by_role("tab", name="Salts and Solvents").click()
            frame.wait_for_function(PICTURES, arg=20, timeout=30_000)
            frame.locator('[class*="Dialog-module_buttonTop"]').click()
            frame.wait_for_function("() => !document.querySelector('[role=tabpanel]')", timeout=10_000)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            page.keyboard.press("Escape")  # Streamlit's key: the focus on the page, not in Ketcher's frame
            page.wait_for_function("() => !(" + SHOWN + ")()", timeout=90_000)

            frame = open_editor(page, f"annotate_{sid}_2_draw")
            frame.evaluate("async () => { await window.ketcher.setMolecule('CCO.OC(=O)c1ccccc1'); }")
            until(lambda: same(smiles_in(frame), "CCO.O=C(O)c1ccccc1"))
            frame.get_by_role("button", name="Apply").click()
            page.wait_for_function("() => !(" + SHOWN + ")()", timeout=90_000)
            field = page.get_by_label(SMILES_LABEL).last
            expect(field).to_have_value(re.compile(r"\S"))
            _idle(page)
            drawn = field.input_value()
            assert smiles_set(drawn) == smiles_set("CCO.O=C(O)c1ccccc1"), drawn
            expect(page.get_by_text("Canonical form:")).to_be_visible()
            page.get_by_label("My explanation").last.fill("Fischer esterification of benzoic acid with ethanol.")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _idle(page)
            _keys(page, "Alt+6", "Alt+8")  # neither matches: the AGENT rule tags REFUTE, which says why
            expect(page.get_by_text("Your message will be tagged", exact=False)).to_be_visible()
            until(lambda: editor_frame(page) is not None)
            editor_frame(page).evaluate("() => { window.pxpMark = 1; }")  # the editor made for the drawn molecules
            _keys(page, "Control+Enter")
            expect(page.get_by_text("Your reply (message 4)")).to_be_visible(timeout=90_000)
            _idle(page)
            # the next reply form, pre-filled with the same molecules, keeps the page's editor
            assert editor_frame(page).evaluate("() => window.pxpMark") == 1
            stored, _ = _session_of(url, sid)
            assert (stored[1].sender, stored[1].prediction, stored[1].tag) == ("human", drawn, "REFUTE")
            # the chemist's own proposal is drawn like the machine's, and every drawing fits its column
            expect(page.get_by_text("The human's proposed step", exact=False).first).to_be_attached()
            assert not page.evaluate(OVERFLOW), page.evaluate(OVERFLOW)
            page.screenshot(path="artifacts/annotate-1280x720-drawn.png")

            page.goto(f"{base}/sessions?session={sid}")
            expect(page.get_by_text("The human's proposed step", exact=False).first).to_be_visible(timeout=90_000)
            _idle(page)
            assert page.get_by_text("The machine's proposed step", exact=False).count() == 2
            assert not page.evaluate(OVERFLOW), page.evaluate(OVERFLOW)
            page.get_by_text("The human's proposed step", exact=False).first.scroll_into_view_if_needed()
            page.screenshot(path="artifacts/sessions-1280x720-drug.png")
        finally:
            browser.close()
