"""A refused Send says so (README "Login and roles"): when the case on screen can no longer take the
annotator's reply (taken over by a colleague, closed), the click of its Send is not lost in the move
to the next case. The annotator sees one line saying what happened and that the reply was not sent,
the typed reply stays on screen to copy, and the server writes a "refused" audit row
(pxp.running.access.refuse_stale).
"""

from __future__ import annotations

import streamlit as st

from pxp.app import resources, ui
from pxp.app.annotate.keys import S
from pxp.running.access import refuse_stale
from pxp.running.live.assignment import LiveError
from pxp.running.live.turns import load_session


def form_shown(sid: int, j: int) -> None:
    """Remember which reply form is on screen (its Send may arrive after the case changed hands)."""
    S["annotate_shown"] = (sid, j)


def stale_send(sid: int, annotator_id: int) -> None:
    """The case on screen can no longer be served: if this run is the click of its Send, refuse it
    (audited) and keep the line and the typed reply for the page to show."""
    shown = S.get("annotate_shown")
    if not shown or shown[0] != sid:
        return
    j = int(shown[1])
    key = f"annotate_{sid}_{j}"
    if S.get(f"{key}_send") is not True or (sid, j) in S.get("annotate_sent", set()):
        return
    why = refuse_stale(resources.engine(), sid, annotator_id=annotator_id, j=j)
    if why is None:
        return
    try:
        s = load_session(resources.engine(), sid)
        case = f"case {s.ordinal} ({s.instance_key})"
    except LiveError:
        case = "the case"
    reply = "\n\n".join(str(S.get(k) or "").strip() for k in (f"{key}_pred", f"{key}_expl"))
    S["annotate_refused"] = (f"Your reply to {case} was not sent: {why}. Nothing was stored.", reply.strip())
    S.pop("annotate_shown", None)


def refused_note() -> None:
    """The refused Send's one line and, below it, the typed reply to copy (until hidden)."""
    note = S.get("annotate_refused")
    if not note:
        return
    line, reply = note
    st.error(ui.escape_md(line), icon=":material/block:")
    if reply:
        st.caption("Your reply as typed (copy it with the button at its right):")
        st.code(reply, language=None, wrap_lines=True)
    st.button("Hide", key="annotate_hide_refused", type="tertiary",
              on_click=lambda: S.pop("annotate_refused", None))
