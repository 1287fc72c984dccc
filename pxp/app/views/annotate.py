"""Annotate: the human agent of PXP in the browser (DESIGN §1, "The human in the browser").

Render functions only: the session, claims and steps come from pxp.running.live, the tag
preview from pxp.agents.browser. Session-state keys start with "annotate_".
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from pxp.agents.base import AgentUnavailable, Answer
from pxp.agents.browser import answer_changed, human_turn, label_options, predictions_match
from pxp.app import auth, resources, ui
from pxp.app.prefs import load_prefs
from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.running.access import may_open, submit_as
from pxp.running.live.abandonment import abandoned_sessions, take_over
from pxp.running.live.assignment import (
    LiveError,
    claim_next,
    create_live_experiment,
    ensure_annotator,
    live_experiments,
    machine_name,
)
from pxp.running.live.overlap import read_case_lists
from pxp.running.live.turns import LiveSession, load_session, machine_step

ROLES = ["Radiologist", "Chemist", "Other expert"]
TAG_KEYS = {Tag.RATIFY: "Alt+1", Tag.REFUTE: "Alt+2", Tag.REVISE: "Alt+3", Tag.REJECT: "Alt+4"}
# the two questions of the AGENT rule (MATCH, AGREE): Yes and No keys of each
MATCH_KEYS = ("Alt+5", "Alt+6")
AGREE_KEYS = ("Alt+7", "Alt+8")
SUBMIT_KEY = "Ctrl+Enter"
S = st.session_state


def identity() -> int | None:
    """Who is annotating: the logged-in user when login is on (pxp.app.auth), else a name and a role."""
    S.pop("annotate_me", None)
    with st.sidebar:
        st.subheader("Who are you?")
        if auth.login_on():
            user = auth.current_user()
            name = user.annotator_name if user is not None else ""
            st.caption(f"Annotating as {ui.escape_md(name)}")
        else:
            name = st.text_input("Your name", key="annotate_name", placeholder="e.g. Dr. Rao")
            st.caption(auth.OPEN_NOTE)
        role = st.selectbox("Your role", ROLES, key="annotate_role",
                            on_change=_role_changed)
    if not name.strip():
        return None
    try:
        S["annotate_me"] = ensure_annotator(resources.engine(), name=name, role=role)
        return int(S["annotate_me"])
    except LiveError as err:
        st.sidebar.error(str(err))
        return None


ROLE_TASKS = {"Radiologist": "rad", "Chemist": "drug"}


def _role_default(datasets: dict[str, str]) -> int:
    """The first dataset of the role's task (a radiologist starts on X-rays), else the first."""
    task = ROLE_TASKS.get(str(S.get("annotate_role", "")))
    return next((i for i, t in enumerate(datasets.values()) if t == task), 0)


def _role_changed() -> None:
    """A new role moves the dataset picker to the first dataset of the role's task."""
    from pxp.app.data import dataset_choices

    datasets = dataset_choices(resources.engine())
    task = ROLE_TASKS.get(str(S.get("annotate_role", "")))
    first = next((n for n, t in datasets.items() if t == task), None)
    if first is not None:
        S["annotate_dataset"] = first


def choose_experiment() -> tuple[int, DeltaGenerator] | None:
    """The dataset and live experiment to work on (a default one is made when none exists)."""
    eng = resources.engine()
    from pxp.app.data import dataset_choices

    datasets = dataset_choices(eng)
    if not datasets:
        st.warning("There is no dataset yet. Import one on the Datasets page.")
        return None
    with st.sidebar:
        st.subheader("What to annotate")
        names = list(datasets)
        ds = st.selectbox("Dataset", names, key="annotate_dataset", index=_role_default(datasets),
                          format_func=lambda n: f"{n} ({datasets[n]})")
        exps = live_experiments(eng, dataset=ds)
        if not exps:
            prefs = load_prefs(eng)
            try:
                create_live_experiment(eng, dataset=ds, n=prefs.n, k=prefs.k,
                                       machine=prefs.generator, checker=prefs.checker,
                                       base_url=prefs.base_url or None,
                                       temperature=prefs.generator_temperature,
                                       max_tokens=prefs.generator_max_tokens)
            except LiveError as err:
                st.error(str(err))
                return None
            exps = live_experiments(eng, dataset=ds)
        by_id = {e.id: e for e in exps}
        pending = S.pop("annotate_select_experiment", None)
        if pending is not None and pending[0] == ds and pending[1] in by_id:
            S[f"annotate_experiment_{ds}"] = pending[1]
        eid = st.selectbox("Experiment", list(by_id), key=f"annotate_experiment_{ds}",
                           format_func=lambda i: by_id[i].name)
        info = by_id[eid]
        slot = st.empty()  # filled at the end of the run, after its steps: it never lags
        st.caption(f"Machine: {ui.escape_md(machine_name(info.machine))} · n = {info.n}, k = {info.k}")
        with st.expander("New live experiment"):
            new_experiment_form(ds)
    return int(eid), slot


def show_progress(slot: DeltaGenerator, eid: int) -> None:
    """Cases done in the experiment, read after this run's steps (so it never lags by one)."""
    info = next((e for e in live_experiments(resources.engine()) if e.id == eid), None)
    if info is None:
        return
    with slot:
        st.progress(min(1.0, info.finished / info.sessions) if info.sessions else 0.0,
                    text=f"{info.finished} of {info.sessions} cases done" if info.overlap == 1 else
                    f"{info.finished} of {info.sessions} annotations done ({info.overlap} annotators per case)")


def new_experiment_form(dataset: str) -> None:
    eng = resources.engine()
    prefs = load_prefs(eng)
    with st.form("annotate_new_exp", border=False):
        name = st.text_input("Name (optional)", key="annotate_new_exp_name")
        c1, c2 = st.columns(2)
        n = c1.number_input("n: messages per session", 2, 50, prefs.n, key="annotate_new_exp_n")
        k = c2.number_input("k: REJECT allowed after", 1, 50, prefs.k, key="annotate_new_exp_k")
        machine = st.text_input("Machine agent", prefs.generator, key="annotate_new_exp_machine",
                                help="simulated, or provider:model such as anthropic:claude-sonnet-4-6")
        shuffle = st.checkbox("Shuffle the cases", key="annotate_new_exp_shuffle")
        overlap = st.number_input("Annotators per case (overlap)", 1, 20, 1, key="annotate_new_exp_overlap",
                                  help="Each case is annotated by this many different people, none twice")
        lists = st.file_uploader("Case lists (optional CSV: annotator, instance)", type=["csv"],
                                 key="annotate_new_exp_lists",
                                 help="Each listed annotator is served only their cases; others none")
        if st.form_submit_button("Create"):
            try:
                case_lists = read_case_lists(lists.getvalue()) if lists is not None else None
                eid = create_live_experiment(eng, dataset=dataset, name=name, n=int(n), k=int(k),
                                             overlap=int(overlap), case_lists=case_lists,
                                             machine=machine.strip() or "simulated",
                                             checker=prefs.checker, base_url=prefs.base_url or None,
                                             shuffle=shuffle, temperature=prefs.generator_temperature,
                                             max_tokens=prefs.generator_max_tokens)
            except LiveError as err:
                st.error(str(err))
                return
            S["annotate_select_experiment"] = (dataset, eid)  # selected on the next run
            S.pop("annotate_sid", None)
            st.rerun()


def show_abandoned(eid: int, annotator_id: int) -> None:
    eng = resources.engine()
    idle = abandoned_sessions(eng, experiment_id=eid, idle_minutes=30, exclude_annotator=annotator_id)
    if not idle:
        return
    with st.sidebar.expander(f"Abandoned cases ({len(idle)})"):
        for a in idle:
            st.caption(f"Case {a.ordinal} ({ui.escape_md(a.instance_key)}), {a.messages} messages, "
                       f"left by {ui.escape_md(a.annotator)} {a.idle_minutes} min ago")
            if st.button("Resume this case", key=f"annotate_takeover_{a.session_id}"):
                if take_over(eng, session_id=a.session_id, annotator_id=annotator_id, idle_minutes=30):
                    S["annotate_sid"] = a.session_id
                    st.rerun()
                st.warning("Someone else resumed it first.")


def current_session(eid: int, annotator_id: int) -> int | None:
    """The session on screen: kept across reruns; the next claim when it is done."""
    sid = S.get("annotate_sid")
    key = (eid, annotator_id)
    if sid is not None and S.get("annotate_sid_for") == key and may_open(resources.engine(), int(sid), annotator_id):
        s = load_session(resources.engine(), int(sid))
        if s.experiment_id == eid and s.turn is not None:
            return int(sid)
        if s.experiment_id == eid:
            S["annotate_last_finished"] = s.id
    sid = claim_next(resources.engine(), experiment_id=eid, annotator_id=annotator_id)
    S["annotate_sid"], S["annotate_sid_for"] = sid, key
    return sid


def machine_turn(s: LiveSession) -> bool:
    """Produce the machine's message if it is its turn; False when it failed (retry shown)."""
    err_key = f"annotate_machine_error_{s.id}_{s.j}"
    if err_key in S:
        st.error(f"The machine agent could not answer: {S[err_key]}")
        st.button("Retry", key=f"annotate_retry_{s.id}_{s.j}", type="primary",
                  on_click=lambda: S.pop(err_key, None), shortcut=SUBMIT_KEY)
        return False
    what = "The simulated agent is answering…" if s.is_simulated else "The machine is answering…"
    try:
        with st.spinner(what):
            machine_step(resources.engine(), s.id, resources.machine(s.experiment_id))
    except (AgentUnavailable, LiveError) as err:
        S[err_key] = " ".join(str(err).split()) or "the service did not answer"
        st.rerun()
    return True


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
        with st.popover("Transcript"):
            ui.show_flags(done.flags())
            for m in done.messages:
                ui.show_message(m, machine_label=done.machine_label, task_kind=done.match_kind,
                                annotator=done.annotator, target=done.payload)
        st.button("Hide", key="annotate_hide_finished", type="tertiary",
                  on_click=lambda: S.pop("annotate_last_finished", None))


def _split(s: LiveSession) -> list[int]:
    """Column widths: the case on the left, the conversation and reply (wide enough for the
    tag row on one line) on the right."""
    return [4, 7] if s.asset_sha256 else [5, 7]


def instance_panel(s: LiveSession) -> None:
    eng = resources.engine()
    head = st.container(horizontal=True, vertical_alignment="center", key=f"annotate_case_{s.id}")
    with head:
        st.markdown(f"**Case {s.ordinal} of {s.instances}** · {ui.escape_md(s.instance_key)}")
        if s.synthetic:
            ui.synthetic_badge()
    if s.match_kind == "smiles":
        name = s.meta.get("name")
        st.markdown("**Target molecule**" + (f": {ui.escape_md(str(name))}" if name else ""))
        ui.molecule(s.payload)
    elif s.asset_sha256:
        ui.xray(eng, s.instance_id, s.meta, key=f"annotate_img_{s.instance_id}")
    else:
        ui.show_text(s.payload, empty="(this case has no image)")


def transcript_panel(s: LiveSession) -> None:
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
                                annotator=s.annotator, target=s.payload)
    last = s.last_from(Sender.MACHINE)
    if last is not None:
        st.markdown(f"**The machine now says** (message {last.j}):")
        ui.show_message(last, machine_label=s.machine_label, task_kind=s.match_kind,
                        target=s.payload)


def _yes_no(label: str, key: str, keys: tuple[str, str], fill: tuple[str, str]) -> bool | None:
    """A Yes/No question as two buttons with keyboard shortcuts; the answer (None: not yet).

    Yes pre-fills the field `fill` = (state key, machine's value) when it is empty: a
    prediction that matches is the machine's, so RATIFY takes three keys (issue 17).
    """
    v: bool | None = S.get(key)
    st.markdown(label)
    with st.container(horizontal=True):
        for text, value, sc in (("Yes", True, keys[0]), ("No", False, keys[1])):
            st.button(text, key=f"{key}_{text.lower()}", shortcut=sc,
                      type="primary" if v is value else "secondary",
                      on_click=_answer, args=(key, value, fill))
    return v


def _answer(state_key: str, value: bool, fill: tuple[str, str]) -> None:
    S[state_key] = value
    field, machine_value = fill
    if value and not str(S.get(field) or "").strip():
        S[field] = machine_value


def answer_form(s: LiveSession) -> None:
    """The human's turn: facts, my answer, the live tag preview, Send."""
    j = s.j
    key = f"annotate_{s.id}_{j}"
    machine = s.last_from(Sender.MACHINE)
    mine = s.last_from(Sender.HUMAN)
    assert machine is not None
    st.markdown(f"**Your reply (message {j})**")
    c1, c2 = st.columns(2)
    with c1:
        match = _yes_no("Its prediction matches mine?", f"{key}_match", MATCH_KEYS,
                        (f"{key}_pred", machine.prediction))
    with c2:
        agree = _yes_no("Its explanation agrees with mine?", f"{key}_agree", AGREE_KEYS,
                        (f"{key}_expl", machine.explanation))

    prediction, invalid = prediction_input(s, key, mine.prediction if mine else "")
    S.setdefault(f"{key}_expl", mine.explanation if mine else "")
    explanation = st.text_area(
        "My explanation", key=f"{key}_expl", height=80,
        placeholder="What you see and why (your report or pathway)",
    )
    answer = Answer(prediction, explanation)
    previous = Answer(mine.prediction, mine.explanation) if mine else None
    changed = answer_changed(answer, previous, match_kind=s.match_kind)
    auto = predictions_match(machine.prediction, prediction, match_kind=s.match_kind)
    if auto is not None and match is not None and auto != match:
        st.caption("Note: by the automatic check the two predictions are "
                   f"{'the same' if auto else 'different'}.")

    chosen_key = f"{key}_tag"
    chosen: Tag | None = S.get(chosen_key)
    row = st.container(horizontal=True)
    with row:
        for tag, sc in TAG_KEYS.items():
            st.button(tag.value, key=f"{key}_pick_{tag.value}", shortcut=sc,
                      type="primary" if chosen is tag else "secondary", help=ui.TAG_HELP[tag.value],
                      on_click=_pick, args=(chosen_key, tag))
        st.button("Auto", key=f"{key}_pick_auto", shortcut="Alt+0",
                  type="primary" if chosen is None else "secondary",
                  help="Let the AGENT rule choose the tag from your answers",
                  on_click=_pick, args=(chosen_key, None))
    turn = human_turn(j, s.k, match=match, agree=agree, changed=changed and mine is not None,
                      chosen=chosen, new_prediction_matches=auto)
    preview = st.container(key=f"{key}_preview")
    with preview:
        if chosen is None and (match is None or agree is None) and invalid in (None, NO_PREDICTION):
            st.markdown(":blue[:material/touch_app:] Answer the two questions above, or pick a "
                        "tag yourself.")
        elif invalid is not None and not (chosen is not None and turn.refused):
            st.error(f"Cannot send: {invalid}", icon=":material/error:")
        elif turn.refused:
            st.error(f"Not allowed: {turn.refused}")
        elif turn.tag is not None:
            line = st.container(horizontal=True, vertical_alignment="center")
            with line:
                st.markdown("Your message will be tagged")
                ui.tag_badge(turn.tag)
            st.caption(ui.escape_md(turn.reason))
    send = st.button("Send", key=f"{key}_send", type="primary", shortcut=SUBMIT_KEY,
                     icon=":material/send:")
    if send:
        submit(s, answer, turn, invalid)


def _pick(state_key: str, tag: Tag | None) -> None:
    S[state_key] = tag


NO_PREDICTION = "give your prediction first"


def prediction_input(s: LiveSession, key: str, previous: str) -> tuple[str, str | None]:
    """The label picker (RAD) or SMILES field with live validation (DRUG).

    (value, why it cannot be sent or None). The label picker lists the machine's
    prediction first; typing filters it and Enter picks (issue 17).
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
        value = st.text_input("My prediction: reactant SMILES (separate with a dot)",
                              key=pkey, placeholder="e.g. CC(=O)OC(C)=O.Nc1ccc(O)cc1")
        if not value.strip():
            return "", NO_PREDICTION
        try:
            canon = ".".join(sorted(smiles_set(value)))
        except InvalidSmiles as err:
            st.error(str(err))
            return value, str(err)
        st.caption("Canonical form:")
        st.code(canon, language=None, wrap_lines=True)
        ui.reaction(value, s.payload)
        return value, None
    value = st.text_input("My prediction", key=pkey)
    return value, (None if value.strip() else NO_PREDICTION)


def submit(s: LiveSession, answer: Answer, turn: object, invalid: str | None) -> None:
    """Store message j once (token: session and j), then the machine's reply once."""
    from pxp.agents.browser import HumanTurn

    assert isinstance(turn, HumanTurn)
    token = (s.id, s.j)
    sent = S.setdefault("annotate_sent", set())
    if token in sent:
        return
    if invalid is not None:
        st.error(f"Not sent: {invalid}.")
        return
    if not turn.ok or turn.facts is None:
        st.error(f"Not sent: {turn.refused or 'the tag is not allowed'}")
        return
    out = submit_as(resources.engine(), s.id, annotator_id=S.get("annotate_me", -1), j=s.j, answer=answer,
                    facts=turn.facts)
    if out.status == "refused":
        st.error(f"Not sent: {out.message}")
        return
    if out.status != "sent":
        S["annotate_notice"] = f"Not sent again: {out.message} (perhaps from another tab)."
    sent.add(token)
    S.pop("annotate_last_finished", None)  # the previous case's note has been seen
    S["annotate_scroll"] = True  # the next reply form is brought into view
    st.rerun()


def render() -> None:
    st.title("Annotate")
    annotator_id = identity()
    if annotator_id is None:
        st.info("Enter your name in the sidebar to start. Then read the case on the left, the "
                "machine's answer on the right, and reply below it.")
        return
    chosen = choose_experiment()
    if chosen is None:
        return
    eid, slot = chosen
    annotate(eid, annotator_id)
    show_progress(slot, eid)


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
    notice = S.pop("annotate_notice", None)
    if notice:
        st.warning(notice)
    finished_note()
    if sid is None:
        st.success("Every case of this experiment has been annotated. Thank you! "
                   "Start a new live experiment in the sidebar to go on.")
        return
    s = load_session(resources.engine(), sid)
    if s.turn is Sender.MACHINE and not machine_turn(s):
        left, right = st.columns(_split(s), gap="large")
        with left:
            instance_panel(s)
        with right:
            transcript_panel(s)
        return
    s = load_session(resources.engine(), sid)
    if s.turn is None:
        S["annotate_last_finished"] = s.id
        S.pop("annotate_sid", None)
        if s.status == "aborted":
            S["annotate_hold"] = eid
        st.rerun()
    left, right = st.columns(_split(s), gap="large")
    with left:
        instance_panel(s)
    with right:
        transcript_panel(s)
        form = f"annotate_form_{s.id}_{s.j}"
        with st.container(key=form):
            answer_form(s)
    if S.pop("annotate_scroll", False):
        new_case = ("annotate_finished", f"annotate_case_{s.id}") if s.j == 2 else ()
        ui.bring_into_view(form, f"annotate_{s.id}_{s.j}_send", token=form, top_keys=new_case)
    st.caption(f"Keyboard: prediction matches {MATCH_KEYS[0]} Yes / {MATCH_KEYS[1]} No, "
               f"explanation agrees {AGREE_KEYS[0]} Yes / {AGREE_KEYS[1]} No, "
               f"{', '.join(f'{k} {t.value}' for t, k in TAG_KEYS.items())}, "
               f"Alt+0 automatic tag, {SUBMIT_KEY} send.")


render()
