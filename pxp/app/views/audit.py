"""Audit (admins): who opened, answered, took over or abandoned which session, when (docs/operations.md, Login and
roles).

Reads the audit trail that pxp.storage.audit writes at each live-session write.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pxp.app import resources, ui
from pxp.storage.audit import audit_events

st.title("Audit")
st.caption("Every live-session write, newest first: who opened (claimed), answered, took over or "
           "abandoned which session, and refused writes into another annotator's session.")
c1, c2 = st.columns(2)
actor = c1.text_input("Who (exact name or email)", key="audit_actor").strip() or None
sid_text = c2.text_input("Session id", key="audit_session").strip()
sid: int | None = None
if sid_text:
    if not sid_text.isdigit():
        st.error(ui.escape_md(f"{sid_text[:20]!r} is not a session id (a whole number)."))
        st.stop()
    sid = int(sid_text)
rows = audit_events(resources.engine(), actor=actor, session_id=sid, limit=2000)
if not rows:
    st.info("Nothing recorded yet for this choice.")
else:
    ui.table(pd.DataFrame([{
        "when (UTC)": r.at.strftime("%Y-%m-%d %H:%M:%S"), "who": r.actor, "did": r.action,
        "session": r.session_id, "message": r.j, "detail": r.detail,
    } for r in rows]), hide_index=True)
    st.caption(f"{len(rows):,} event(s) shown (at most 2,000).")
