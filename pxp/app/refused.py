"""A refused Send says so (docs/operations.md "Login and roles"): when the case on screen can no longer take
the annotator's reply (taken over by a colleague, closed, the user's role removed), the click of its
Send is not lost in the move to the next case or the refusal. The annotator sees one line saying what
happened and that the reply was not sent, the typed reply stays on screen to copy, and the server
writes a "refused" audit row (pxp.team.access.refuse_stale).
"""

from __future__ import annotations

import streamlit as st

from pxp.app import resources, ui
from pxp.running.pxp.live.assignment import LiveError
from pxp.running.pxp.live.turns import load_session
from pxp.storage import audit
from pxp.team.access import refuse_stale

S = st.session_state


def form_shown(sid: int, j: int) -> None:
    """Remember which reply form is on screen (its Send may arrive after the case changed hands)."""
    S["annotate_shown"] = (sid, j)


def _pressed(sid: int | None = None) -> tuple[int, int, str] | None:
    """(session, j, form key) of the reply form on screen if this run is the click of its Send
    (not yet sent), else None."""
    shown = S.get("annotate_shown")
    if not shown or (sid is not None and shown[0] != sid):
        return None
    j = int(shown[1])
    key = f"annotate_{shown[0]}_{j}"
    if S.get(f"{key}_send") is not True or (shown[0], j) in S.get("annotate_sent", set()):
        return None
    return int(shown[0]), j, key


def _typed(key: str) -> str:
    return "\n\n".join(str(S.get(k) or "").strip() for k in (f"{key}_pred", f"{key}_expl")).strip()


def stale_send(sid: int, annotator_id: int) -> None:
    """The case on screen can no longer be served: if this run is the click of its Send, refuse it
    (audited) and keep the line and the typed reply for the page to show."""
    pressed = _pressed(sid)
    if pressed is None:
        return
    _, j, key = pressed
    why = refuse_stale(resources.engine(), sid, annotator_id=annotator_id, j=j)
    if why is None:
        return
    try:
        s = load_session(resources.engine(), sid)
        case = f"case {s.ordinal} ({s.instance_key})"
    except LiveError:
        case = "the case"
    S["annotate_refused"] = (f"Your reply to {case} was not sent: {why}. Nothing was stored.", _typed(key))
    S.pop("annotate_shown", None)


def role_lost(actor: str) -> None:
    """The user's role was removed while a reply form was on screen: a Send pressed now is refused
    (audited) and said so below the page's refusal, with the typed reply to copy."""
    pressed = _pressed()
    if pressed is None:
        return
    sid, j, key = pressed
    audit.record(resources.engine(), "refused", session_id=sid, j=j, actor=actor,
                 detail="a reply after the user's role was removed")
    S["annotate_refused"] = ("Your reply was not sent: your role on this study was removed. Nothing was stored.",
                             _typed(key))
    S.pop("annotate_shown", None)
    refused_note()


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
