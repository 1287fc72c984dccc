"""Keyboard order of the reply form (README "Annotate"): Tab goes prediction → explanation → the
answers → Send. The prediction picker's clear ("×") button and the chemist's Draw button (which has
its own key, pxp.app.annotate.editor) would take Tab stops between the prediction and the
explanation; a fixed script takes them out of the Tab order (they stay clickable). Nothing typed is
lost by a Tab or a reload: Tab in the picker with a filter typed picks the highlighted finding first
(as Enter would), and the explanation is handed to the server (which keeps it as the draft,
pxp.app.annotate.drafts) a moment after typing pauses, not only when the field loses the focus. Only
our own element keys are used; no page text is read or written.
"""

from __future__ import annotations

import streamlit as st

_JS = """<script>
(function () {
  const w = window.parent, d = w.document;
  if (w.__pxpTabOrder) return;
  w.__pxpTabOrder = true;
  const sel = '[class*="st-key-annotate_"] button[aria-label="Clear value"]:not([tabindex="-1"]), '
    + '[class*="st-key-annotate_"][class*="_draw"] button:not([tabindex="-1"])';
  const fix = () => d.querySelectorAll(sel).forEach((b) => b.setAttribute("tabindex", "-1"));
  new w.MutationObserver(fix).observe(d.body, {childList: true, subtree: true, attributes: true,
                                               attributeFilter: ["tabindex"]});
  fix();
  const inForm = (e) => e && e.closest && e.closest('[class*="st-key-annotate_"][class*="_pred"]');
  d.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (ev.key !== "Tab" || ev.shiftKey || !inForm(t) || t.tagName !== "INPUT" || !t.value) return;
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
    if (!(t && t.tagName === "TEXTAREA" && t.closest('[class*="st-key-annotate_"][class*="_expl"]'))) return;
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
})();
</script>"""


def tab_order() -> None:
    """Install (once per page) the script that keeps clear and Draw buttons out of the form's Tab order."""
    with st.sidebar:
        st.iframe(_JS, height=1)
