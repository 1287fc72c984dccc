"""Keyboard order of the reply form (README "Annotate"): Tab goes prediction → explanation → the
answers → Send. The prediction picker's clear ("×") button and the chemist's Draw button (which has
its own key, pxp.app.annotate.editor) would take Tab stops between the prediction and the
explanation; a fixed script takes them out of the Tab order (they stay clickable). Only our own
element keys are used; no page text is read or written.
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
})();
</script>"""


def tab_order() -> None:
    """Install (once per page) the script that keeps clear and Draw buttons out of the form's Tab order."""
    with st.sidebar:
        st.iframe(_JS, height=1)
