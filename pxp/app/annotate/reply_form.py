"""The Annotate reply form: the two questions of the AGENT rule (MATCH, AGREE), the expert's
prediction and explanation, the tag picker with its live preview, and Send (DESIGN §1; the tag
rules from pxp.agents.browser and pxp.protocols.pxp.rules).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pxp.agents.browser import clean_answer, human_content, human_turn, label_options, prediction_noun
from pxp.app import ui
from pxp.app.annotate.drafts import restore_draft, save_draft
from pxp.app.annotate.editor import draw_button, take_drawn
from pxp.app.annotate.keys import AGREE_KEY, AGREE_KEYS, AUTO_KEY, MATCH_KEYS, NO_PREDICTION, SUBMIT_KEY, TAG_KEYS, S
from pxp.app.annotate.send import agree_with_machine, sent_note, smiles_problem, submit
from pxp.app.refused import form_shown
from pxp.data.chem import smiles_set
from pxp.protocols.pxp.rules import Sender, Tag, missing_reason
from pxp.running.pxp.live.turns import LiveSession


def _yes_no(label: str, key: str, keys: tuple[str, str], fill: tuple[str, str],
            recorded: bool | None = None) -> bool | None:
    """A Yes/No question as two buttons with keyboard shortcuts; the answer (None: not yet).

    Yes pre-fills the field `fill` = (state key, machine's value) when it is empty: a
    prediction that matches is the machine's, so RATIFY takes three keys. The answer never
    overrides a prediction already typed; MATCH over the content decides the fact, and the
    highlighted button is always the fact recorded (`recorded`, when the content decides it).
    """
    v: bool | None = S.get(key)
    shown = v if recorded is None or v is None else recorded
    st.markdown(label)
    with st.container(horizontal=True):
        for text, value, sc in (("Yes", True, keys[0]), ("No", False, keys[1])):
            st.button(text, key=f"{key}_{text.lower()}", shortcut=sc,
                      type="primary" if shown is value else "secondary",
                      on_click=_answer, args=(key, value, fill))
    return v


def _answer(state_key: str, value: bool, fill: tuple[str, str]) -> None:
    S[state_key] = value
    field, machine_value = fill
    if value and not str(S.get(field) or "").strip():
        S[field] = machine_value


def reply_key(s: LiveSession) -> str:
    """The element and session-state key prefix of the reply form on screen."""
    return f"annotate_{s.id}_{s.j}"


#: why a disagreement with an empty explanation is not sent
UNREASONED = "say why you disagree (your explanation is empty)"


def answer_form(s: LiveSession, view: dict[str, Any] | None = None) -> None:
    """The human's turn: my answer, the two questions, the tag, the live preview, Send.

    In keyboard order (Tab): prediction, explanation, the answers, the tags, Send; the one
    chord (AGREE_KEY) agrees with the machine. `view` is the image window the expert settled on,
    stored with the message.
    """
    j = s.j
    key = reply_key(s)
    machine = s.last_from(Sender.MACHINE)
    mine = s.last_from(Sender.HUMAN)
    assert machine is not None
    form_shown(s.id, j)
    sent_note(s.id)
    st.markdown(f"**Your reply (message {j})**")
    restore_draft(s, key)
    prediction, invalid = prediction_input(s, key, mine.prediction if mine else "")
    S.setdefault(f"{key}_expl", mine.explanation if mine else "")
    explanation = st.text_area(
        "My explanation", key=f"{key}_expl", height=68,
        placeholder="What you see and why (your report or pathway)",
    )
    answer, refused = clean_answer(prediction, explanation)
    invalid = invalid or refused
    content = human_content(s.messages, answer, match_kind=s.match_kind)
    noun = prediction_noun(s.match_kind)
    c1, c2 = st.columns(2)
    with c1:
        match = _yes_no("Its prediction matches mine?", f"{key}_match", MATCH_KEYS,
                        (f"{key}_pred", machine.prediction), recorded=content.match)
    with c2:
        agree = _yes_no("Its explanation agrees with mine?", f"{key}_agree", AGREE_KEYS,
                        (f"{key}_expl", machine.explanation))
    if content.match is not None and match is not None and content.match != match:
        st.caption(ui.escape_md(f"Recorded as {'matching' if content.match else 'different'}: your {noun} "
                                f"is {content.compared[0]} and the machine's is {content.compared[1]}."))

    chosen_key = f"{key}_tag"
    chosen: Tag | None = S.get(chosen_key)
    row = st.container(horizontal=True)
    with row:
        for tag, sc in TAG_KEYS.items():
            st.button(tag.value, key=f"{key}_pick_{tag.value}", shortcut=sc,
                      type="primary" if chosen is tag else "secondary", help=ui.TAG_HELP[tag.value],
                      on_click=_pick, args=(chosen_key, tag))
        st.button("Auto", key=f"{key}_pick_auto", shortcut=AUTO_KEY,
                  type="primary" if chosen is None else "secondary",
                  help="Let the AGENT rule choose the tag from your answers",
                  on_click=_pick, args=(chosen_key, None))
    turn = human_turn(j, s.k, match=match, agree=agree, changed=content.changed, chosen=chosen,
                      content=content, noun=noun)
    # a disagreement carries its reason (docs/annotating.md, Tags): checked here, and again by the engine
    unreasoned = (invalid is None and turn.tag is not None and not turn.refused
                  and missing_reason(turn.tag, answer.explanation) is not None)
    invalid = UNREASONED if unreasoned else invalid
    preview = st.container(key=f"{key}_preview")
    with preview:
        decided = match if content.match is None else content.match
        if chosen is None and (decided is None or agree is None) and invalid in (None, NO_PREDICTION):
            st.markdown(":blue[:material/touch_app:] Answer the questions above, or pick a "
                        "tag yourself.")
        elif invalid not in (None, NO_PREDICTION):
            if invalid in (refused, UNREASONED):  # else the SMILES field's own line says why: one line, not two
                st.error(f"Cannot send: {ui.escape_md(invalid)}", icon=":material/error:")
        elif invalid is not None and not (chosen is not None and turn.refused):
            st.error(f"Cannot send: {ui.escape_md(invalid)}", icon=":material/error:")
        elif turn.refused:
            st.error(f"Not allowed: {ui.escape_md(turn.refused)}")
        elif turn.tag is not None:
            line = st.container(horizontal=True, vertical_alignment="center")
            with line:
                st.markdown("Your message will be tagged")
                ui.tag_badge(turn.tag)
            st.caption(ui.escape_md(turn.reason))
    with st.container(horizontal=True, vertical_alignment="center"):
        send = st.button("Send", key=f"{key}_send", type="primary", shortcut=SUBMIT_KEY,
                         icon=":material/send:")
        agreed = st.button("I agree with the machine", key=f"{key}_agree_all", shortcut=AGREE_KEY,
                           icon=":material/thumb_up:",
                           help="Its prediction and explanation become yours, both questions Yes, "
                                f"sent as RATIFY ({AGREE_KEY})")
    if agreed:
        agree_with_machine(s, view)
    save_draft(s, key)
    if send:
        submit(s, answer, turn, invalid, view)


def _pick(state_key: str, tag: Tag | None) -> None:
    S[state_key] = tag


def prediction_input(s: LiveSession, key: str, previous: str) -> tuple[str, str | None]:
    """The label picker (RAD) or SMILES field with live validation (DRUG).

    (value, why it cannot be sent or None). The label picker lists the machine's
    prediction first; typing filters it and Enter picks (docs/annotating.md, Keys).
    """
    pkey = f"{key}_pred"
    if s.match_kind == "label":
        machine = s.last_from(Sender.MACHINE)
        first = machine.prediction if machine else ""
        options = label_options([first] if first.strip() else [], *s.labels, previous)
        if pkey not in S or S[pkey] not in options:
            S[pkey] = previous if previous in options else None
        value = st.selectbox("My prediction", options, index=None, key=pkey,
                             placeholder="Type to filter the findings, Enter to pick")
        return (value or ""), (None if value else NO_PREDICTION)
    S.setdefault(pkey, previous)
    if s.match_kind == "smiles":
        take_drawn(key)
        value = st.text_input("My prediction: reactant SMILES (separate with a dot)",
                              key=pkey, placeholder="e.g. CC(=O)OC(C)=O.Nc1ccc(O)cc1, or Draw them",
                              live="1s")  # kept (and checked) a second after typing pauses
        draw_button(key)
        if not value.strip():
            return "", NO_PREDICTION
        if (why := smiles_problem(value)) is not None:
            st.error(ui.escape_md(f"Cannot send: {why}"))  # the form's one line about it
            return value, why
        canon = ".".join(sorted(smiles_set(value)))
        st.caption("Canonical form:")
        st.code(canon, language=None, wrap_lines=True)
        ui.reaction(value, s.payload, target_name=str(s.meta.get("name") or "") or None)
        return value, None
    value = st.text_input("My prediction", key=pkey, live="1s")
    return value, (None if value.strip() else NO_PREDICTION)


def keyboard_help() -> None:
    """One line listing the keyboard shortcuts of the form."""
    st.caption(f"Keyboard: {AGREE_KEY} I agree with the machine (sent as RATIFY), "
               f"prediction matches {MATCH_KEYS[0]} Yes / {MATCH_KEYS[1]} No, "
               f"explanation agrees {AGREE_KEYS[0]} Yes / {AGREE_KEYS[1]} No, "
               f"{', '.join(f'{k} {t.value}' for t, k in TAG_KEYS.items())}, "
               f"{AUTO_KEY} automatic tag, {SUBMIT_KEY} send.")
