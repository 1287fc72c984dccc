"""What every page of the app installs for accessibility (docs/accessibility.md): the theme's CSS and
one page script. Contrast comes from the theme (.streamlit/config.toml's textColor, so that Streamlit's
faded captions and shortcut hints reach 4.5:1); the CSS adds a visible focus ring (WCAG 2.2, 2.4.7) on
every focusable element and shows the shortcut hints on the green primary buttons unfaded.

The page script names what Streamlit leaves without a name or with a glyph's: a Material icon inside
text (its ligature, e.g. "smart_toy icon") is hidden from the accessibility tree, a focusable code block
gets a role and a name, a scrolling part with nothing focusable in it takes the focus (so the keys
scroll it) with a name, and the app's script frames are hidden. Only our own constant text is written.
"""

from __future__ import annotations

import json

import streamlit as st

#: the title (accessible name) of the app's zero-height script frames, none of which is a Tab stop
SCRIPT_TITLE = "pxp page script (no content)"
#: the focus ring: 2 px, dark blue (6.4:1 on white), outside the element; Streamlit's text fields and
#: pickers take the focus on an inner element their frame clips, so the frame shows the ring
FOCUS_RING = "#0b57d0"
#: the names of the app's scrolling parts (by element key), for a screen reader and the Tab order
SCROLLING_NAMES = {"st-key-sk_play_dialogue": "The game's dialogue so far"}
CSS = """<style>
:focus-visible { outline: 2px solid RING !important; outline-offset: 2px !important; }
[data-baseweb="input"]:focus-within, [data-baseweb="textarea"]:focus-within,
[data-baseweb="select"] > div:focus-within { outline: 2px solid RING !important; outline-offset: 1px; }
[data-baseweb="input"] input:focus-visible, [data-baseweb="textarea"] textarea:focus-visible,
[data-baseweb="select"] input:focus-visible { outline: none !important; }
button[kind^="primary"] kbd { opacity: 1 !important; }
.st-key-pxp_a11y { display: none; }
</style>""".replace("RING", FOCUS_RING)

JS = """<script>
(function () {
  const w = window.parent, d = w.document, title = TITLE, NAMES = SCROLLING;
  if (w.__pxpA11y) w.__pxpA11y.disconnect();  // the newest copy of this script acts
  let due = false;
  const fix = () => {
    due = false;
    // an icon's ligature inside text ("smart_toy icon") is no name: the text beside it says it
    d.querySelectorAll('[role="img"][aria-label$=" icon"]:not([aria-hidden])').forEach((e) => {
      const glyph = (e.textContent || "").trim() + " icon";
      if (e.getAttribute("aria-label") === glyph) e.setAttribute("aria-hidden", "true");
    });
    // a code block is focusable so that it scrolls by keyboard: it gets a role and a name
    d.querySelectorAll('[data-testid="stCode"][tabindex]:not([aria-label])').forEach((e) => {
      e.setAttribute("role", "group");
      e.setAttribute("aria-label", "Code");
    });
    // a part that scrolls with nothing focusable in it (the game's dialogue) takes the focus, so the keys scroll it
    d.querySelectorAll('[data-testid="stVerticalBlock"][overflow="auto"]:not([tabindex])').forEach((e) => {
      if (e.scrollHeight <= e.clientHeight || e.querySelector("a, button, input, textarea, select, [tabindex]")) return;
      e.setAttribute("tabindex", "0");
      e.setAttribute("role", "region");
      const key = [...e.classList].find((c) => c.startsWith("st-key-"));
      e.setAttribute("aria-label", NAMES[key] || "Scrolling part of the page");
    });
    // the app's script frames have no content: out of the accessibility tree (they take no Tab stop)
    d.querySelectorAll('iframe[title="' + title + '"]:not([aria-hidden])').forEach((f) => {
      f.setAttribute("aria-hidden", "true");
      f.setAttribute("tabindex", "-1");
    });
  };
  w.__pxpA11y = new w.MutationObserver(() => { if (!due) { due = true; w.requestAnimationFrame(fix); } });
  w.__pxpA11y.observe(d.body, {childList: true, subtree: true});
  fix();
})();
</script>""".replace("TITLE", json.dumps(SCRIPT_TITLE)).replace("SCROLLING", json.dumps(SCROLLING_NAMES))


def script_frame(js: str) -> None:
    """One of the app's fixed scripts in a zero-height frame, named and out of the Tab order."""
    st.iframe(js, height=1, tab_index=-1, alt=SCRIPT_TITLE)


def install() -> None:
    """The focus ring and the page script, on every page (pxp.app.router.route), login screens too."""
    st.html(CSS)
    with st.container(key="pxp_a11y"):
        script_frame(JS)
