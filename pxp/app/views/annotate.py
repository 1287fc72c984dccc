"""Annotate: the human agent of PXP in the browser (DESIGN §1, "The human in the browser").

A thin page: the sidebar, the case pane, the conversation pane and the reply form live in
pxp.app.annotate; the session, claims and steps come from pxp.running.pxp.live. Session-state keys
start with "annotate_".
"""

from __future__ import annotations

import streamlit as st

from pxp.app import auth, resources, ui
from pxp.app.annotate.case_pane import instance_panel, settled_window, split
from pxp.app.annotate.conversation import current_session, finished_note, machine_turn, transcript_panel
from pxp.app.annotate.editor import editor_box, molecule_editor
from pxp.app.annotate.keys import SUBMIT_KEY, S
from pxp.app.annotate.reply_form import answer_form, keyboard_help, reply_key
from pxp.app.annotate.sidebar import choose_experiment, identity, show_abandoned, show_progress
from pxp.app.annotate.tab_order import tab_order
from pxp.app.prepare import prepare_next_case
from pxp.app.refused import refused_note, stale_send
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.assignment import unlisted
from pxp.running.pxp.live.turns import load_session
from pxp.team.access import may_open

#: the page compacted so a case and its whole reply form fit a 1280×720 screen (README "Annotate");
#: our own constant CSS on our own element keys, no user text
_COMPACT = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 2.5rem; padding-left: 1rem; padding-right: 1rem; }
.st-key-annotate_reply, .st-key-annotate_reply [data-testid="stVerticalBlock"] { gap: 0.45rem; }
.st-key-annotate_reply [data-testid="stVerticalBlockBorderWrapper"] > div { padding: 0.6rem 0.8rem; }
.st-key-annotate_reply [data-testid="stWidgetLabel"] { min-height: 1.1rem; margin-bottom: 0.1rem; }
.st-key-annotate_reply [data-testid="stHorizontalBlock"] { gap: 0.35rem; }
.st-key-annotate_reply button[data-testid^="stBaseButton"] { min-height: 2rem; padding: 0.1rem 0.45rem; }
.st-key-annotate_reply button [aria-label^="Shortcut"] { font-size: 0.72rem; margin-left: 0.15rem; }
section[data-testid="stSidebar"][data-collapsed="false"] { width: 14rem !important; min-width: 14rem !important; }
.st-key-annotate_case_pane { --pxp-film-h: max(360px, calc(100vh - 10.5rem)); }
</style>"""


def render() -> None:
    st.html(_COMPACT)
    tab_order()  # first in the sidebar: its place never changes, so its script is never restarted
    annotator_id = identity()
    if annotator_id is None:
        st.title("Annotate")
        st.info("Enter your name in the sidebar to start. Then read the case on the left, the "
                "machine's answer on the right, and reply below it.")
        return
    chosen = choose_experiment()
    if chosen is None:
        return
    eid, slot = chosen
    annotate(eid, annotator_id)
    show_progress(slot, eid)


def no_cases(eid: int, annotator_id: int) -> None:
    """Nothing to serve: the annotator is on none of the experiment's case lists, or all is done."""
    name = unlisted(resources.engine(), experiment_id=eid, annotator_id=annotator_id)
    if name is not None:
        st.info(f"You ({ui.escape_md(name)}) have no cases assigned in this experiment: ask a researcher "
                "or an admin to put you on its case list.")
    elif auth.may("create experiments"):
        st.success("Every case of this experiment has been annotated. Thank you! "
                   "Start a new live experiment in the sidebar to go on.")
    else:
        st.success("Every case of this experiment has been annotated. Thank you!")


def annotate(eid: int, annotator_id: int) -> None:
    """The case on screen: the machine's turn if due, else the expert's form."""
    show_abandoned(eid, annotator_id)
    if S.get("annotate_hold") == eid:
        # after an aborted case the expert goes on by choice, so a failing machine
        # cannot abort case after case unseen
        finished_note()
        st.button("Next case", key="annotate_next", type="primary", shortcut=SUBMIT_KEY,
                  icon=":material/skip_next:", on_click=lambda: S.pop("annotate_hold", None))
        return
    sid = current_session(eid, annotator_id)
    finished_note()
    if sid is None:
        no_cases(eid, annotator_id)
        return
    s = load_session(resources.engine(), sid)
    left, right = st.columns(split(s), gap="small" if s.asset_sha256 else "large")
    machine_first = s.turn is Sender.MACHINE  # its answer takes a while: the case is there to read meanwhile
    if machine_first:
        with left:
            instance_panel(s)
    with right:  # else sent first: the text and the reply form do not wait behind a film's megabytes
        _conversation(sid, eid, annotator_id)
    if not machine_first:
        with left:
            instance_panel(s)
    keyboard_help()


@st.fragment
def _conversation(sid: int, eid: int, annotator_id: int) -> None:
    """The conversation and the reply form: a Send reruns only this part (a fragment), not the case
    pane beside it; a finished case reruns the page for the next one (README "Annotate")."""
    with resources.database_away():
        _reply(sid, eid, annotator_id)


def _reply(sid: int, eid: int, annotator_id: int) -> None:
    if not may_open(resources.engine(), sid, annotator_id):  # taken over or closed meanwhile
        stale_send(sid, annotator_id)  # a Send pressed for it is refused in words, not lost
        st.rerun(scope="app")
    s = load_session(resources.engine(), sid)
    # first in the pane: the DRUG molecule editor's box keeps its place from one reply form to the next
    editor = editor_box() if s.match_kind == "smiles" else None
    notice = S.pop("annotate_notice", None)
    if notice:
        st.warning(ui.escape_md(notice))
    refused_note()
    # the machine's turn (its spinner, its text as it comes) is drawn in a box of its own, there in every run:
    # the reply form after it keeps its place in the page from the run that brought the machine's answer to
    # the next, so its fields are not made anew and the keyboard's focus is not lost with them
    turn = st.container()
    if s.turn is Sender.MACHINE:
        with turn:
            answered = machine_turn(s)
        if not answered:
            transcript_panel(s)
            return
    s = load_session(resources.engine(), sid)
    if s.turn is None:
        S["annotate_last_finished"] = s.id
        S.pop("annotate_sid", None)
        if s.status == "aborted":
            S["annotate_hold"] = eid
        st.rerun(scope="app")
    if S.get("annotate_prepared_for") != s.id:  # this case has a usable INIT: prepare the next one
        S["annotate_prepared_for"] = s.id
        prepare_next_case(eid, annotator_id)
    with st.container(key="annotate_reply"):
        transcript_panel(s)
        form = f"annotate_form_{s.id}_{s.j}"
        with st.container(key=form):
            answer_form(s, settled_window(s))
        if editor is not None:
            molecule_editor(editor, s, reply_key(s))

render()
