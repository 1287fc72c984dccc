"""Shared constants of the Annotate page: keyboard shortcuts and the session-state alias.

Session-state keys of the page start with "annotate_" (DESIGN §1, "The human in the browser").
"""

from __future__ import annotations

import streamlit as st

from pxp.protocols.pxp.rules import Tag

TAG_KEYS = {Tag.RATIFY: "Alt+1", Tag.REFUTE: "Alt+2", Tag.REVISE: "Alt+3", Tag.REJECT: "Alt+4"}
# the two questions of the AGENT rule (MATCH, AGREE): Yes and No keys of each
MATCH_KEYS = ("Alt+5", "Alt+6")
AGREE_KEYS = ("Alt+7", "Alt+8")
SUBMIT_KEY = "Ctrl+Enter"
#: the automatic tag (the AGENT rule chooses it)
AUTO_KEY = "Alt+0"
S = st.session_state
NO_PREDICTION = "give your prediction first"
#: one chord to agree: the machine's answer becomes the expert's, sent as RATIFY (README "Annotate")
AGREE_KEY = "Alt+A"
