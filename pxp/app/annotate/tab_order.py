"""Keyboard order of the reply form (README "Annotate"): Tab goes prediction → explanation → the
answers → Send. The prediction picker's clear ("×") button and the chemist's Draw button (which has
its own key, pxp.app.annotate.editor) would take Tab stops between the prediction and the
explanation; a fixed script takes them out of the Tab order (they stay clickable). Nothing typed is
lost by a Tab or a reload: Tab in the picker with a filter typed picks the highlighted finding first
(as Enter would), and the explanation is handed to the server (which keeps it as the draft,
pxp.app.annotate.drafts) a moment after typing pauses, not only when the field loses the focus. The
page's shortcuts (CHORDS) are performed by this script, each once (docs/annotating.md, Keys): one pressed
while the page is still being redrawn, or before its button is on the page (a case still loading), is
held and pressed once the page is up to date and the button there, in order, for up to 3 s after the
page is idle; it is dropped if the reply form it was pressed on has been answered and is gone: keys
typed ahead are neither lost nor sent with stale form values or to a form the expert has not seen. A
key pressed as a new case appears goes to that case's first reply form. A field of a reply form made anew
by a run while it has the focus gives the focus to the same field of the newest form. A new reply form is
focused and brought into view as soon as it is in the page (pxp.app.a11y.focus.PLACE_JS), the page's first
one too (on load, after a reload). Only our own element keys, the fields' names and the shortcut labels of
Streamlit's buttons are read; no page text is written.
"""

from __future__ import annotations

import json

import streamlit as st

from pxp.app.a11y.focus import PLACE_JS
from pxp.app.a11y.page import script_frame
from pxp.app.annotate.editor import DRAW_KEY
from pxp.app.annotate.keys import AGREE_KEY, AGREE_KEYS, AUTO_KEY, MATCH_KEYS, SUBMIT_KEY, TAG_KEYS

#: every shortcut of the Annotate page's buttons, as Streamlit names them on the button ("Alt + 1")
CHORDS = [k.replace("+", " + ") for k in (*TAG_KEYS.values(), AUTO_KEY, *MATCH_KEYS, *AGREE_KEYS, AGREE_KEY,
                                           SUBMIT_KEY, DRAW_KEY)]

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
  // the page's chords (CHORDS, from the buttons' own shortcuts) are performed here, each once, never by
  // Streamlit's own key binding: that one clicks whatever button has the key at that moment, and during a run
  // that is an old button (or none) whose click the run then ignores, so the key was lost. A chord is held
  // while the page is busy (a run, or a moment after one for the page to take its values: a shortcut pressed
  // before the previous one's run had reached the page would send the form's old values), and while its
  // button is not on the page yet (a case still loading); it is performed, in order, once its button is
  // there, and dropped HOLD_MS after the page is idle without it.
  const CHORDS = new Set(CHORD_LIST);
  const root = () => d.querySelector("[data-test-script-state]");
  // "rerunRequested" and "running" (and the rest) until the run is over: "notRunning"
  const running = () => !!root() && root().getAttribute("data-test-script-state") !== "notRunning";
  // after a shortcut: busy until its run is seen to end (then a moment for the page to take its values),
  // or, when no run is seen (a quick run can start and end in one update), for at most WAIT_MS
  const WAIT_MS = 400, SETTLE_MS = 50, HOLD_MS = 3000;
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
  // drawn by the run on screen: Streamlit keeps the last run's elements, marked stale, until a run replaces them
  const ELEMENT = '[data-testid="stElementContainer"]';
  const fresh = (e) => { const c = e.closest(ELEMENT); return !!c && c.getAttribute("data-stale") !== "true"; };
  const freshBlock = (e) => !!e.querySelector(ELEMENT + ':not([data-stale="true"])');
  const FORM = "st-key-annotate_form_";
  const formKey = (f) => f && [...f.classList].find((c) => c.startsWith(FORM)) || null;
  const forms = () => [...d.querySelectorAll('[class*="st-key-annotate_form_"]')];
  const caseOf = (k) => k && k.slice(FORM.length).split("_")[0];
  // the case on screen: the newest case header the run has drawn, else the last one still shown
  const caseNow = () => {
    const keys = (e) => [...e.classList].filter((c) => /^st-key-annotate_case_[0-9]+$/.test(c));
    const heads = [...d.querySelectorAll('[class*="st-key-annotate_case_"]')].filter((e) => keys(e).length);
    const h = heads.filter(freshBlock).pop() || heads.pop();
    return h ? keys(h)[0].slice("st-key-annotate_case_".length) : null;
  };
  const button = (names) => [...d.querySelectorAll("button")].filter((b) => fresh(b) && !b.disabled
    && !b.closest("[inert]") && [...b.querySelectorAll("[aria-label]")].some(
      (s) => names.some((n) => s.getAttribute("aria-label") === "Shortcut " + n))).pop();
  // what a held key acts on: its button, null while it is not there yet, or GONE when the key is not to be
  // performed: it was pressed on a reply form (of the case on screen) that has been answered and replaced
  // (so a double Send, or a key meant for a form the expert never saw, sends nothing); a key pressed as a
  // new case appears, before its form, is for that case's first form
  const GONE = {};
  const target = (k) => {
    const f = formKey(forms().filter(freshBlock).pop());
    if (f && (k.form ? f !== k.form : k.case && caseOf(f) !== k.case)) return GONE;
    const b = button(k.names);
    const bf = b && formKey(b.closest('[class*="st-key-annotate_form_"]'));
    return b && (!bf || bf === f) ? b : null;
  };
  const pump = () => {
    while (mine() && held.length && !busy()) {
      const k = held[0], b = target(k);
      if (b === GONE || (!b && now() - Math.max(k.at, settledAt) > HOLD_MS)) { held.shift(); continue; }
      if (!b) return;  // held until its button is on the page
      held.shift();
      commit(k.target);
      pendingUntil = now() + WAIT_MS;
      b.click();
      return;  // the next key waits for this one's run
    }
  };
  w.setInterval(pump, 20);
  d.addEventListener("keydown", (ev) => {
    const names = mine() && label(ev);
    if (!names || !CHORDS.has(names[0])) return;
    ev.preventDefault(); ev.stopImmediatePropagation();
    if (ev.repeat) return;  // a key held down is one press
    const c = caseNow(), f = formKey(forms().filter((e) => caseOf(formKey(e)) === c).pop());
    held.push({names, case: c, form: f, target: ev.target, at: now()});
    pump();
  }, true);
  new w.MutationObserver(() => {
    if (!mine() || running()) return;
    pendingUntil = 0;
    settledAt = now() + SETTLE_MS;
  }).observe(d.documentElement, {subtree: true, attributes: true, attributeFilter: ["data-test-script-state"]});
  // the focus is not lost when a run makes the focused field of a reply form anew (Streamlit mounts a part of the
  // page again when its place changed, as at a new case on a loaded machine): it goes back to the same field of the
  // newest form as soon as that is in the page (within 2 s), unless the focus has gone somewhere meanwhile
  let lost = null;
  const restore = () => {
    if (!lost || !mine()) return;
    const a = d.activeElement;
    if (now() > lost.until || (a && a !== d.body)) { lost = null; return; }
    const f = forms().filter(freshBlock).pop() || forms().pop();
    const c = f && [...f.querySelectorAll(lost.tag)].find((e) => e.getAttribute("aria-label") === lost.name);
    if (c) { lost = null; c.focus({preventScroll: true}); }
  };
  d.addEventListener("focusout", (ev) => {
    const t = ev.target;
    if (!mine() || ev.relatedTarget || !t.closest || !t.closest('[class*="st-key-annotate_form_"]')) return;
    const was = {name: t.getAttribute("aria-label"), tag: t.tagName, until: now() + 2000};
    w.setTimeout(() => { if (!t.isConnected) { lost = was; restore(); } }, 0);
  }, true);
  d.addEventListener("focusin", () => { lost = null; }, true);
  new w.MutationObserver(restore).observe(d.body, {childList: true, subtree: true});
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
</script>""".replace("CHORD_LIST", json.dumps(CHORDS))


def tab_order() -> None:
    """Install the keyboard script, first in the sidebar (so its frame stays put): the form's Tab order, the
    explanation handed over as typing pauses, shortcuts held while the page is redrawn, and each new reply
    form focused and in view."""
    with st.sidebar:
        script_frame(_JS)
