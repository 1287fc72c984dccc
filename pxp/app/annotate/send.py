"""Sending the expert's message from the Annotate page (DESIGN §1, "The human in the browser"):
the Send of the reply form and the one chord that agrees with the machine (README "Annotate").
"""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from pxp.agents.base import Answer
from pxp.agents.browser import HumanTurn, human_content, human_turn, prediction_noun, too_long
from pxp.app import resources, ui
from pxp.app.annotate.drafts import discard_draft
from pxp.app.annotate.keys import AGREE_KEY, S
from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.running.pxp.live.turns import LiveSession
from pxp.team.access import submit_as

_NOTE = "annotate_sent_note"


def smiles_problem(value: str) -> str | None:
    """Why a reactant SMILES cannot be sent (RDKit's one line), or None."""
    try:
        smiles_set(value)
    except InvalidSmiles as err:
        return str(err)
    return None


def clean_view(view: Any) -> dict[str, Any] | None:
    """The viewer's window as stored with a message: {center, width, invert} as numbers, or None."""
    if not isinstance(view, dict):
        return None
    try:
        center, width = float(view["center"]), float(view["width"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(center) and math.isfinite(width)):
        return None
    return {"center": center, "width": width, "invert": bool(view.get("invert", False))}


def agree_with_machine(s: LiveSession, view: Any = None) -> None:
    """The one chord: the machine's prediction and explanation become the expert's, both questions
    Yes, the tag from the AGENT rule. Sent only when that tag is RATIFY; otherwise one line says
    why and nothing is sent."""
    machine = s.last_from(Sender.MACHINE)
    assert machine is not None
    answer = Answer(machine.prediction, machine.explanation)
    noun = prediction_noun(s.match_kind)
    invalid = None
    if not answer.prediction.strip():
        invalid = f"the machine gave no {noun}"
    elif s.match_kind == "smiles" and (why := smiles_problem(answer.prediction)) is not None:
        invalid = f"the machine's {noun} cannot be sent: {why}"
    content = human_content(s.messages, answer, match_kind=s.match_kind)
    turn = human_turn(s.j, s.k, match=True, agree=True, changed=content.changed, content=content, noun=noun)
    if invalid is not None:
        st.error(ui.escape_md(f"Not sent: you cannot agree by {AGREE_KEY} here: {invalid}. "
                              "Answer in the form instead."), icon=":material/block:")
        return
    if not turn.ok or turn.tag is not Tag.RATIFY:
        what = f"gives {turn.tag.value} ({turn.reason})" if turn.ok and turn.tag else f"is refused: {turn.refused}"
        st.error(ui.escape_md(f"Not sent: agreeing with the machine {what}, not RATIFY. "
                              "Answer in the form instead."), icon=":material/block:")
        return
    S[_NOTE] = (s.id, f"Sent message {s.j} as RATIFY by {AGREE_KEY} (you agreed with the machine): "
                      f"{' '.join(answer.prediction.split())[:120]}")
    if not submit(s, answer, turn, None, view):
        S.pop(_NOTE, None)


def ended_note(finished: int) -> str | None:
    """What the chord sent that ended case `finished`, once, for its finished line (it adds no line to the page,
    so the next case still fits)."""
    sent = S.get(_NOTE)
    if not sent or sent[0] != finished:
        return None
    S.pop(_NOTE, None)
    return f"Case before: {sent[1]}"


def sent_note(sid: int) -> None:
    """What the chord just sent, once (so a wrong key is noticed): a line above the next form, in the page's flow
    (a toast would cover the machine's next message); when the case ended, the finished case's line says so."""
    sent = S.pop(_NOTE, None)
    if not sent:
        return
    case, note = sent
    if case != sid:  # the case ended with it: said on its finished line (conversation.finished_note)
        return
    with st.container(horizontal=True, vertical_alignment="center", key="annotate_sent_note"):
        ui.tag_badge(Tag.RATIFY)
        st.markdown(":green[:material/check:] " + ui.escape_md(str(note)))


def submit(s: LiveSession, answer: Answer, turn: HumanTurn, invalid: str | None,
           view: Any = None) -> bool:
    """Store message j once (token: session and j), then the machine's reply once; False (and one
    line) when it is not sent."""
    token = (s.id, s.j)
    sent = S.setdefault("annotate_sent", set())
    if token in sent:
        return False
    if invalid is not None:
        st.error(f"Not sent: {ui.escape_md(invalid)}.")
        return False
    if (why := too_long(answer)) is not None:
        st.error(f"Not sent: {why}.")
        return False
    if not turn.ok or turn.facts is None:
        st.error(f"Not sent: {ui.escape_md(turn.refused or 'the tag is not allowed')}")
        return False
    out = submit_as(resources.engine(), s.id, annotator_id=S.get("annotate_me", -1), j=s.j, answer=answer,
                    facts=turn.facts, view=clean_view(view))
    if out.status in ("refused", "closed"):
        st.error(f"Not sent: {ui.escape_md(out.message)}. Your reply is still in the form.",
                 icon=":material/block:")
        return False
    discard_draft(s)
    S.pop("annotate_refused", None)  # an earlier refusal's note has served its purpose
    if out.status != "sent":
        S["annotate_notice"] = f"Not sent again: {out.message} (perhaps from another tab)."
    sent.add(token)
    S.pop("annotate_last_finished", None)  # the previous case's note has been seen
    _rerun_conversation(ended=out.result is not None and out.result.finished)
    return True  # not reached: st.rerun ends the run


def _rerun_conversation(*, ended: bool) -> None:
    """Rerun only the conversation and reply form (the page's fragment) when this run is that
    fragment's own and the case goes on; else the whole page (the next case, in one run)."""
    from streamlit.errors import StreamlitAPIException

    if ended:
        st.rerun(scope="app")
    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:  # a whole-page run (e.g. the test harness's): rerun the page
        st.rerun()


