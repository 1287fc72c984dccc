"""Where the keyboard is (docs/annotating.md, Keys; docs/accessibility.md): the reply form brought into view with
the focus in its first control, on the Annotate page and in the scorekeeping game. Imports streamlit and nothing of
pxp but the page script frame.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pxp.app.a11y.page import script_frame

#: scroll so the reply form (CSS selectors first..last) is in view and focus its first control, unless the focus
#: is in it already; at a new case, its top (the first of `tops` present) first, when it fits; again after late
#: layout (images). Only our own element keys are used; no page text is read or written.
PLACE_JS = """function pxpBringIntoView(d, first, last, tops) {
  const w = d.defaultView;
  let tries = 0, focused = false;
  function place() {
    const f = d.querySelector(first), l = d.querySelector(last);
    const c = f && f.querySelector("button, input, textarea");
    if (c && !focused && !f.contains(d.activeElement)) c.focus({preventScroll: true});
    focused = focused || !!c;
    if (!f || !l) { if (tries++ < 40) w.setTimeout(place, 50); return; }
    const top = tops.map((s) => d.querySelector(s)).find((e) => e);
    const seen = (e) => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= w.innerHeight; };
    if (top && !(seen(top) && seen(l))) top.scrollIntoView({block: "start"});  // no scroll when all is in view
    const r = l.getBoundingClientRect();
    if (r.bottom > w.innerHeight - 8 || r.top < 0) {
      l.style.scrollMarginBottom = "16px";
      l.scrollIntoView({block: "end"});
    }
    if (f.getBoundingClientRect().top < 0) f.scrollIntoView({block: "start"});
  }
  place();
  w.setTimeout(place, 300);
  w.setTimeout(place, 900);
}"""


def bring_into_view(first_key: str, last_key: str, token: str, top_keys: Sequence[str] = ()) -> None:
    """Scroll the widgets keyed first_key..last_key into view and focus the first (docs/annotating.md, Keys);
    with top_keys (a new case), the first of them present is brought to the top first, so the
    case begins in view whenever it fits with its reply form.

    Streamlit cannot move focus itself: a zero-height component runs a fixed script (PLACE_JS)
    that finds the two widgets by their key class (st-key-…); no untrusted text is used.
    """
    import json

    def sel(k: str) -> str:
        return json.dumps(".st-key-" + re.sub(r"[^A-Za-z0-9_-]", "", k))

    tops = ", ".join(sel(k) for k in top_keys)
    script_frame(f"<script>\n// {re.sub(r'[^A-Za-z0-9_-]', '', token)}\n{PLACE_JS}\n"
              f"pxpBringIntoView(window.parent.document, {sel(first_key)}, {sel(last_key)}, [{tops}]);\n</script>")
