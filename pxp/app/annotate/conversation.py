"""The Annotate conversation pane: the messages so far, the machine's latest message, the
machine's turn (with retry) and the note on the case just finished (DESIGN §1; the PXP
protocol of Lagrange et al., messages tagged RATIFY/REFUTE/REVISE/REJECT).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from pxp.agents.base import AgentUnavailable
from pxp.app import resources, ui
from pxp.app.annotate.keys import SUBMIT_KEY, S
from pxp.app.annotate.send import ended_note
from pxp.app.refused import stale_send
from pxp.llm.base import streaming
from pxp.llm.local import waiting_shown
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.assignment import LiveError, claim_next
from pxp.running.pxp.live.prepare import machine_step_once
from pxp.running.pxp.live.turns import LiveSession, load_session
from pxp.tasks.spec import partial_answer
from pxp.team.access import may_open


def current_session(eid: int, annotator_id: int) -> int | None:
    """The session on screen: kept across reruns; the next claim when it is done, taken over or closed
    (a Send pressed for it meanwhile is refused with one line: pxp.app.refused)."""
    sid = S.get("annotate_sid")
    key = (eid, annotator_id)
    if sid is not None and S.get("annotate_sid_for") == key:
        if may_open(resources.engine(), int(sid), annotator_id):
            s = load_session(resources.engine(), int(sid))
            if s.experiment_id == eid and s.turn is not None:
                return int(sid)
            if s.experiment_id == eid:
                S["annotate_last_finished"] = s.id
        stale_send(int(sid), annotator_id)  # its Send, if pressed, is refused in words, not lost
    sid = claim_next(resources.engine(), experiment_id=eid, annotator_id=annotator_id)
    S["annotate_sid"], S["annotate_sid_for"] = sid, key
    return sid


def machine_turn(s: LiveSession) -> bool:
    """Produce the machine's message if it is its turn; False when it failed (retry shown)."""
    err_key = f"annotate_machine_error_{s.id}_{s.j}"
    if err_key in S:
        st.error(f"The machine agent could not answer: {ui.escape_md(str(S[err_key]))}")
        st.button("Retry", key=f"annotate_retry_{s.id}_{s.j}", type="primary",
                  on_click=lambda: S.pop(err_key, None), shortcut=SUBMIT_KEY)
        return False
    what = "The simulated agent is answering…" if s.is_simulated else "The machine is answering…"
    box = st.empty()
    try:
        with st.spinner(what), streaming(_live_text(box)), waiting_shown(_waiting(box)):
            machine_step_once(resources.engine(), s.id, resources.machine(s.experiment_id))
    except (AgentUnavailable, LiveError) as err:
        S[err_key] = " ".join(str(err).split()) or "the service did not answer"
        st.rerun()
    finally:
        box.empty()  # the stored message is shown in its place
    return True


def _waiting(box: Any) -> Callable[[str], None]:
    """Say in the box that the machine is waiting for its model to load (a local server's first call); called
    from a timer thread, which is given this page run's context first."""
    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

    ctx = get_script_run_ctx()

    def show(line: str) -> None:
        add_script_run_ctx(ctx=ctx)
        box.caption(line.partition(": ")[2].capitalize() + "…")

    return show


def _live_text(box: Any) -> Callable[[str], None]:
    """Show a reply as it is generated (an LLM machine streams it; README "The app"): its prediction
    once parsed and its explanation so far, as plain text, at most ten times a second. The stored
    message replaces it when the step is done."""
    last = [0.0]

    def show(so_far: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.1:
            return
        last[0] = now
        prediction, explanation = partial_answer(so_far)
        with box.container(border=True):
            st.caption("The machine is writing…")
            if prediction:
                st.markdown(f"**{ui.escape_md(prediction)}**")
            st.text(explanation)

    return show


def finished_note() -> None:
    """The case just finished, as one line above the next case; its transcript one click away."""
    last = S.get("annotate_last_finished")
    if last is None:
        return
    try:
        done = load_session(resources.engine(), int(last))
    except LiveError:
        return
    why = {"ratified": "both agents ratified", "rejected": "it was rejected",
           "bound": f"it reached n = {done.n} messages"}.get(done.stop_reason or "", done.status)
    case = f"Case {done.ordinal} ({ui.escape_md(done.instance_key)})"
    row = st.container(horizontal=True, vertical_alignment="center", key="annotate_finished")
    with row:
        if done.status == "aborted":
            reason = " ".join((done.abort_reason or "no reason was recorded").split())
            st.warning(f"{case} was aborted at message {len(done.messages) + 1}: "
                       f"{ui.escape_md(reason)}. Your messages are kept; it counts as not "
                       "intelligible.", icon=":material/block:")
        else:
            two_way = "yes" if done.flags().get("two_way") else "no"
            st.markdown(f":green[:material/check_circle:] {case} is finished: {why} · "
                        f"2-way intelligible: {two_way}.",
                        width="content")
            sent = ended_note(done.id)
            if sent:  # in the sidebar: the finished line and the next case keep the screen they fit
                st.sidebar.caption(ui.escape_md(sent))
        with st.popover("Transcript"):
            ui.show_flags(done.flags())
            for m in done.messages:
                ui.show_message(m, machine_label=done.machine_label, task_kind=done.match_kind,
                                annotator=done.annotator, target=done.payload,
                                target_name=done.meta.get("name"))
        st.button("Hide", key="annotate_hide_finished", type="tertiary",
                  on_click=lambda: S.pop("annotate_last_finished", None))


def transcript_panel(s: LiveSession) -> None:
    """The conversation: earlier messages (scrolling when long), then what the machine now says."""
    head = st.container(horizontal=True, vertical_alignment="center")
    with head:
        st.markdown(f"**Conversation** · message {min(s.j, s.n)} of at most {s.n}")
        if s.is_simulated:
            ui.simulated_badge()
    earlier = s.messages[:-1]
    if earlier:
        box = st.container(height=420, border=False) if len(earlier) > 2 else st.container()
        with box:
            for m in earlier:
                ui.show_message(m, machine_label=s.machine_label, task_kind=s.match_kind,
                                annotator=s.annotator, target=s.payload, target_name=s.meta.get("name"))
    last = s.last_from(Sender.MACHINE)
    if last is not None:
        st.markdown(f"**The machine now says** (message {last.j}):")
        ui.show_message(last, machine_label=s.machine_label, task_kind=s.match_kind,
                        target=s.payload, target_name=s.meta.get("name"))
