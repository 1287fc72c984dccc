"""Play as the answerer: a person answers the scorekeeping game's questioner and its private probes
(docs/research.md, Scorekeeping game), one reply at a time, and sets a human baseline stored like any model's
(`human:<name>`).

The person sees exactly the prompts a model gets: the dialogue with the questioner on one side and,
apart, the probe asked privately outside that dialogue. Replies go to the game master as typed (its
tag rules apply); the Yes/No buttons produce the tagged probe reply. Every reply is stored at once
(pxp.running.scorekeeping.play), so a reload resumes the episode. Keys: Enter sends a typed reply, Alt+Y /
Alt+N answer a probe (its Yes has the focus: Enter, or Tab to No), Ctrl+Enter starts the next episode.
Game texts and names are shown as plain text.
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pxp.app import ui
from pxp.app.a11y.focus import bring_into_view
from pxp.protocols.scorekeeping import rules
from pxp.protocols.scorekeeping.instances import DOMAINS
from pxp.protocols.scorekeeping.scores import ACCURACY, MAIN_SCORE, SLOT_FILLING_ACCURACY
from pxp.running.scorekeeping import play
from pxp.running.scorekeeping.play import Finished, Play, PlayError

S = st.session_state
SEND_KEY = "Enter"
START_KEY = "Ctrl+Enter"
YES_KEY, NO_KEY = "Alt+Y", "Alt+N"
NAME = "sk_play_name"
FLASH = "sk_play_flash"
ERROR = "sk_play_error"
RESULT = "sk_play_result"
NOTE = "sk_play_note"
#: avatars: a person answers here, not a robot
YOU, QUESTIONER, GAME_MASTER = ":material/person:", ":material/support_agent:", ":material/flag:"
#: the episode scores shown at its end: clembench's names, as a person reads them
SHOWN = ((SLOT_FILLING_ACCURACY, "Slot filling", "{:.0%}"), (ACCURACY, "Probing accuracy", "{:.0%}"),
         (MAIN_SCORE, "Main Score", "{:.1f}"))


def _result(out: Finished) -> None:
    """The finished episode's scores (slot filling, probing accuracy, Main Score) and, when it was
    aborted, which rule which reply broke."""
    with st.container(border=True, key="sk_play_result"):
        if out.why is not None:
            st.warning(ui.escape_md(f"Episode {out.key} was aborted: {out.why}."), icon=":material/block:")
        else:
            st.success(ui.escape_md(f"Episode {out.key} finished and stored; it is on the leaderboard."),
                       icon=":material/check:")
        cols = st.columns(len(SHOWN))
        for col, (name, label, fmt) in zip(cols, SHOWN, strict=True):
            value = out.scores.get(name)
            shown = "—" if value is None or value != value else fmt.format(value)
            col.metric(label, shown, help=f"clembench's {name!r}" + (" (not scored: aborted)" if shown == "—" else ""))


def _reply_key(step: int) -> str:
    return f"sk_play_reply_{step}"


def _start(engine: Engine, model: str) -> None:
    try:
        if play.start(engine, model) is None:
            S[FLASH] = "You have played every episode of this game."
    except PlayError as e:
        S[ERROR] = str(e)


def _send(engine: Engine, model: str, step: int, text: str | None = None, private: str | None = None) -> None:
    """Send the typed reply (or `text`, from a button) for the request shown at `step`; `private` names the
    questioner when it is a private question, for the note that follows it."""
    reply = (S.get(_reply_key(step)) or "") if text is None else text
    reply = reply.strip()  # as an LLM's reply is stripped (clembench's backends)
    if not reply:
        S[ERROR] = "Type a reply first."
        return
    try:
        out = play.reply(engine, model, reply, step)
    except PlayError as e:
        S[ERROR] = str(e)
        return
    if private is not None:
        S[NOTE] = private_note(reply, private)
    if isinstance(out, Finished):
        S[RESULT] = out


def private_note(reply: str, questioner: str) -> tuple[bool, str]:
    """The short note after a private answer: (recorded?, what happened)."""
    value = rules.parse_probe(reply)
    if value is None:
        return False, f"Not recorded: {rules.probe_problem(reply)}. The private question is asked again."
    said = rules.YES if value else rules.NO
    return True, f"Private answer recorded: {said}. The {questioner} does not see it."


def _note() -> None:
    if NOTE in S:
        ok, text = S.pop(NOTE)
        (st.info if ok else st.warning)(ui.escape_md(text), icon=":material/lock:" if ok else ":material/replay:")


def _abandon(engine: Engine, model: str) -> None:
    play.abandon(engine, model)
    S[FLASH] = "Episode dropped; nothing was stored."


def _name() -> str:
    """The player's name: typed, or from the URL (?player=...), which keeps it across a reload."""
    if NAME not in S:
        S[NAME] = st.query_params.get("player", "")
    name: str = st.text_input("Your name", key=NAME, max_chars=play.MAX_NAME,
                              placeholder="e.g. Ada (episodes are stored as human:Ada)")
    if name.strip() and st.query_params.get("player") != name:
        st.query_params["player"] = name
    return name


def _dialogue(p: Play) -> None:
    msgs = p.request.messages[:-1] if p.request.kind == "probe" else p.request.messages
    questioner = DOMAINS[p.experiment].questioner if p.experiment in DOMAINS else "questioner"
    st.markdown(f"**Dialogue with the {ui.escape_md(questioner)}** (shared)")
    with st.container(height=420, key="sk_play_dialogue"):
        for i, m in enumerate(msgs):
            mine = m["role"] != "user"
            with st.chat_message("user" if not mine else "assistant",
                                 avatar=YOU if mine else GAME_MASTER if i == 0 else QUESTIONER):
                st.caption("Game master" if i == 0 else "You" if mine else "Questioner")
                ui.show_text(m["content"])


def _facts(p: Play) -> None:
    """The person's facts, kept in view beside the dialogue (the game master's first message holds them too)."""
    slots = p.request.instance.slots
    with st.container(border=True, key="sk_play_facts"):
        st.markdown("**Your facts** " + " · ".join(f"{ui.escape_md(k)}: **{ui.escape_md(v)}**"
                                                   for k, v in slots.items()))


def _asked(engine: Engine, p: Play) -> None:
    req = p.request
    questioner = DOMAINS[p.experiment].questioner if p.experiment in DOMAINS else "questioner"
    if req.kind == "probe":
        with st.container(border=True, key="sk_play_probe"):
            st.markdown(f"**Private question** (probing round {req.probe_round}, attempt {req.attempt} of "
                        f"{rules.MAX_PROBE_ATTEMPTS}): never shown to the questioner, never part of the dialogue")
            ui.show_text(req.messages[-1]["content"])
            with st.container(horizontal=True):
                st.button("Yes", key=f"sk_play_yes_{p.step}", shortcut=YES_KEY, on_click=_send,
                          args=(engine, p.model, p.step, f"{rules.ASIDE_TAG} {rules.YES}", questioner))
                st.button("No", key=f"sk_play_no_{p.step}", shortcut=NO_KEY, on_click=_send,
                          args=(engine, p.model, p.step, f"{rules.ASIDE_TAG} {rules.NO}", questioner))
        tag, hint = rules.ASIDE_TAG, (f"or type {rules.ASIDE_TAG} and then yes or no; "
                                      f"an invalid reply is asked again, {rules.MAX_PROBE_ATTEMPTS} tries in all")
    else:
        tag, hint = rules.ANSWER_TAG, (f"start with {rules.ANSWER_TAG} and stay on one line: a reply without "
                                       "the tag ends the episode, as it would for a model")
    with st.form(key=f"sk_play_form_{p.step}", border=False, enter_to_submit=True):
        st.text_input("Your reply" if req.kind == "answer" else "Your reply to the private question",
                      value=f"{tag} ", key=_reply_key(p.step))
        st.caption(ui.escape_md(f"Enter sends; {hint}."))
        st.form_submit_button("Send", key=f"sk_play_send_{p.step}", type="primary", icon=":material/send:",
                              on_click=_send, args=(engine, p.model, p.step, None,
                                                    questioner if req.kind == "probe" else None))
    # the focus goes where the next key press belongs: Yes (Alt+Y, Enter) for a probe, the reply for an answer
    first = f"sk_play_yes_{p.step}" if req.kind == "probe" else _reply_key(p.step)
    bring_into_view(first, f"sk_play_send_{p.step}", token=f"{p.key}-{p.step}")


def render(engine: Engine) -> None:
    """The play pane: name, then the episode in progress or a button to start the next one."""
    st.caption("Play the answerer yourself: the questioner asks for your details one by one; before the first "
               "question and after each answer you are asked privately what the questioner knows by now. "
               "Your episodes are scored like a model's and set a human baseline on the leaderboard.")
    name = _name()
    for key, show in ((ERROR, st.error), (FLASH, st.success)):
        if key in S:
            show(ui.escape_md(str(S.pop(key))))
    if RESULT in S:
        _note()
        _result(S.pop(RESULT))
    if not name.strip():
        return
    try:
        model = play.human_model(name)
        p = play.current(engine, model)
        done, total = play.progress(engine, model)
    except PlayError as e:
        st.error(ui.escape_md(str(e)))
        return
    st.caption(ui.escape_md(f"Playing as {model}: {done} of {total} episodes finished."))
    if p is None:
        if done < total:
            st.button("Start the next episode", key="sk_play_start", type="primary", shortcut=START_KEY,
                      icon=":material/play_arrow:", on_click=_start, args=(engine, model))
            bring_into_view("sk_play_start", "sk_play_start", token=f"start-{done}")
        return
    st.markdown(ui.escape_md(f"Episode {p.key}, reply {p.step + 1}"))
    left, right = st.columns([3, 2])
    with left:
        _dialogue(p)
    with right:
        _facts(p)
        _note()
        _asked(engine, p)
        st.button("Drop this episode", key="sk_play_abandon", type="tertiary", on_click=_abandon,
                  args=(engine, model))
