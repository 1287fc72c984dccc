"""Keyboard order of the reply form (README "Annotate"): Tab goes prediction → explanation → the
answers → Send. The prediction picker's clear ("×") button and the chemist's Draw button (which has
its own key, pxp.app.annotate.editor) would take Tab stops between the prediction and the
explanation; a fixed script takes them out of the Tab order (they stay clickable). Nothing typed is
lost by a Tab or a reload: Tab in the picker with a filter typed picks the highlighted finding first
(as Enter would), and the explanation is handed to the server (which keeps it as the draft,
pxp.app.annotate.drafts) a moment after typing pauses, not only when the field loses the focus. A
shortcut pressed while the page is still being redrawn for the previous one is held and pressed once
the page is up to date, in order (dropped if the reply form it was pressed on is gone): keys typed
ahead are neither lost nor sent with stale form values. A new reply form is focused and brought into
view as soon as it is in the page (pxp.app.a11y.focus.PLACE_JS), the page's first one too (on load, after a
reload). Only our own element keys and the shortcut
labels of Streamlit's buttons are read; no page text is written.
"""

from __future__ import annotations

import streamlit as st

from pxp.app.a11y.focus import PLACE_JS
from pxp.app.a11y.page import script_frame

_JS = "<script>\n" + PLACE_JS + """
(function () {
  const w = window.parent, d = w.document;
  // the newest copy of this script is the one that acts: should Streamlit re-create its frame, the old
  // frame's callbacks stop, so each copy takes over from the one before (which, if still alive, stands down)
  const me = {};
  w.__pxpTabOrder = me;
  const mine = () => w.__pxpTabOrder === me;
  const sel = '[class*="st-key-annotate_"] button[aria-label="Clear value"]:not([tabindex="-1"]), '
    + '[class*="st-key-annotate_"][class*="_draw"] button:not([tabindex="-1"])';
  const fix = () => d.querySelectorAll(sel).forEach((b) => b.setAttribute("tabindex", "-1"));
  new w.MutationObserver(() => mine() && fix()).observe(d.body, {childList: true, subtree: true, attributes: true,
                                               attributeFilter: ["tabindex"]});
  fix();
  const inForm = (e) => e && e.closest && e.closest('[class*="st-key-annotate_"][class*="_pred"]');
  d.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (!mine() || ev.key !== "Tab" || ev.shiftKey || !inForm(t) || t.tagName !== "INPUT" || !t.value) return;
    if (t.getAttribute("role") !== "combobox" && !t.closest('[data-baseweb="select"]')) return;
    const enter = new w.KeyboardEvent("keydown", {key: "Enter", code: "Enter", keyCode: 13, which: 13,
                                                  bubbles: true, cancelable: true});
    t.dispatchEvent(enter);  // the highlighted finding is picked; Tab then moves on as usual
  }, true);
  // the explanation reaches the server (and its draft) PAUSE_MS after typing stops: Streamlit hands a
  // text area's value over only when it loses the focus, so it does, and gets it back at once
  const PAUSE_MS = 1200;
  let timer = null;
  d.addEventListener("input", (ev) => {
    const t = ev.target;
    if (!mine() || !(t && t.tagName === "TEXTAREA" && t.closest('[class*="st-key-annotate_"][class*="_expl"]'))) return;
    w.clearTimeout(timer);
    timer = w.setTimeout(() => {
      if (d.activeElement !== t || !t.isConnected) return;
      const [a, b, top] = [t.selectionStart, t.selectionEnd, t.scrollTop];
      t.blur();
      t.focus({preventScroll: true});
      t.setSelectionRange(a, b);
      t.scrollTop = top;
    }, PAUSE_MS);
  }, true);
  // keys held while the page updates: a shortcut pressed before the previous one's run has reached the
  // page would send the form's values as they were before it (Streamlit sends every widget's value with
  // a rerun), so e.g. Alt+5 then Alt+8 at once lost the prediction Alt+5 filled in. Such a key is held
  // and pressed (its button clicked) once the page is up to date; keys keep their order.
  const root = () => d.querySelector("[data-test-script-state]");
  // "rerunRequested" and "running" (and the rest) until the run is over: "notRunning"
  const running = () => !!root() && root().getAttribute("data-test-script-state") !== "notRunning";
  // after a shortcut: busy until its run is seen to end (then a moment for the page to take its values),
  // or, when no run is seen (a quick run can start and end in one update), for at most WAIT_MS
  const WAIT_MS = 400, SETTLE_MS = 50;
  let pendingUntil = 0, settledAt = 0;
  const held = [];
  const now = () => w.performance.now();
  const busy = () => running() || now() < pendingUntil || now() < settledAt;
  const label = (ev) => {
    const base = ev.code.startsWith("Digit") ? ev.code.slice(5) : ev.code.startsWith("Key") ? ev.code.slice(3)
      : ev.code === "Enter" || ev.code === "NumpadEnter" ? "Enter" : null;
    if (!base || ev.shiftKey || (ev.altKey === (ev.ctrlKey || ev.metaKey))) return null;
    return ev.altKey ? ["Alt + " + base, "⌥ + " + base] : ["Ctrl + " + base, "⌘ + " + base];
  };
  // a text field the key was pressed in hands its text over first: Streamlit takes a field's text only
  // when it loses the focus, and a rerun that redraws the form would drop what was typed since
  const commit = (t) => {
    if (!t || !t.isConnected || !(t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text"
        && t.getAttribute("role") !== "combobox" && !t.closest('[data-baseweb="select"]')))) return;
    const [a, b] = [t.selectionStart, t.selectionEnd];
    t.blur();
    t.focus({preventScroll: true});
    t.setSelectionRange(a, b);
  };
  const button = (names) => [...d.querySelectorAll("button")].filter((b) => [...b.querySelectorAll(
    "[aria-label]")].some((s) => names.some((n) => s.getAttribute("aria-label") === "Shortcut " + n))).pop();
  // a held key belongs to the reply form it was pressed on: once that form is answered and gone, the key is
  // dropped (a double Send, or a key meant for a form the expert never saw, sends nothing)
  let lastForm = null;
  const form = () => {
    const f = [...d.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
    if (f) lastForm = [...f.classList].find((c) => c.startsWith("st-key-annotate_form_")) || lastForm;
    return lastForm;
  };
  w.setInterval(() => {
    if (!mine() || !held.length || busy()) return;
    const key = held.shift();
    const b = button(key.names);  // the newest form's button of that key
    if (!b || b.disabled || form() !== key.form) return;
    commit(key.target);
    pendingUntil = now() + WAIT_MS;
    b.click();
  }, 20);
  d.addEventListener("keydown", (ev) => {
    const names = mine() && label(ev);
    if (!names) return;
    // held even when its button is not on the page: while a run redraws the form, its buttons (and
    // Streamlit's own key bindings) can be gone for a moment, and the key would be lost
    if (held.length || busy()) {
      ev.preventDefault(); ev.stopImmediatePropagation();
      held.push({names, form: form(), target: ev.target});
      return;
    }
    form();
    if (!button(names)) return;
    commit(ev.target);
    pendingUntil = now() + WAIT_MS;
  }, true);
  new w.MutationObserver(() => {
    if (!mine()) return;
    if (running()) { form(); return; }  // the form on screen as the run starts
    pendingUntil = 0;
    settledAt = now() + SETTLE_MS;
  }).observe(d.documentElement, {subtree: true, attributes: true, attributeFilter: ["data-test-script-state"]});
  // a new reply form (the next message's, after a Send or at a new case) is focused as soon as it is in the
  // page, before it is painted, and brought into view (at a new case, with the case's top when it fits)
  let due = false;
  const shown = () => {
    if (!mine()) return;
    const f = [...d.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
    const k = f && [...f.classList].find((c) => c.startsWith("st-key-annotate_form_"));
    if (!k) return;
    if (k !== w.__pxpFormShown) {  // kept on the page, so a copy that takes over goes on from it
      due = true;  // the page's first form too: on load, after a reload, once the sidebar has chosen the data
      w.__pxpFormShown = k;
    }
    if (!due || !f.querySelector("button, input, textarea")) return;
    due = false;
    const [sid, j] = k.slice("st-key-annotate_form_".length).split("_");
    pxpBringIntoView(d, "." + k, `.st-key-annotate_${sid}_${j}_send`,
                     j === "2" ? [".st-key-annotate_finished", `.st-key-annotate_case_${sid}`] : []);
  };
  new w.MutationObserver(shown).observe(d.body, {childList: true, subtree: true});
  shown();
})();
</script>"""


def tab_order() -> None:
    """Install the keyboard script, first in the sidebar (so its frame stays put): the form's Tab order, the
    explanation handed over as typing pauses, shortcuts held while the page is redrawn, and each new reply
    form focused and in view."""
    with st.sidebar:
        script_frame(_JS)
