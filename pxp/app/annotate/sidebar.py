"""The Annotate sidebar: who is annotating, which dataset and live experiment, progress,
abandoned cases to take over (DESIGN §1; live sessions from pxp.running.pxp.live).
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from pxp.app import auth, resources, ui
from pxp.app.annotate.keys import S
from pxp.app.data import dataset_choices
from pxp.app.prefs import load_prefs
from pxp.app.router import NEEDS
from pxp.running.pxp.experiments import MAX_PREPARE
from pxp.running.pxp.live.abandonment import abandoned_sessions, take_over
from pxp.running.pxp.live.assignment import (
    LiveError,
    ensure_annotator,
    live_experiments,
    machine_name,
)
from pxp.running.pxp.live.overlap import read_case_lists
from pxp.team.access import AccessDenied, create_live_as

ROLES = ["Radiologist", "Chemist", "Other expert"]


def identity() -> int | None:
    """Who is annotating: the logged-in user when login is on (pxp.app.auth), else a name and a role,
    kept in the URL (?annotator=…&role=…) so a reload or a new tab from it knows who it is."""
    S.pop("annotate_me", None)
    if "annotate_name" not in S and not auth.login_on():
        S["annotate_name"] = str(st.query_params.get("annotator", ""))[:200]
    if "annotate_role" not in S and st.query_params.get("role") in ROLES:
        S["annotate_role"] = st.query_params.get("role")
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
    if not auth.login_on() and (st.query_params.get("annotator"), st.query_params.get("role")) != (name, role):
        st.query_params["annotator"], st.query_params["role"] = name, role
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
    datasets = dataset_choices(resources.engine())
    task = ROLE_TASKS.get(str(S.get("annotate_role", "")))
    first = next((n for n, t in datasets.items() if t == task), None)
    if first is not None:
        S["annotate_dataset"] = first


def no_dataset_line() -> str:
    """What to do when there is no dataset: import one on the Datasets page if the user may open it,
    else whom to ask (an annotator or a researcher cannot open that page)."""
    role = auth.current_role()
    if auth.allowed(role, NEEDS["datasets.py"]):
        return "There is no dataset yet. Import one on the Datasets page."
    whom = "an admin" if auth.allowed(role, "researcher") else "a researcher or an admin"
    return f"There is no dataset yet: ask {whom} to import one."


def choose_experiment() -> tuple[int, DeltaGenerator] | None:
    """The dataset and live experiment to work on. When the dataset has none, a default one is
    made for a role that may create experiments; anyone else is told whom to ask (one line)."""
    eng = resources.engine()
    datasets = dataset_choices(eng)
    if not datasets:
        st.warning(no_dataset_line())
        return None
    creator = auth.may("create experiments")
    with st.sidebar:
        st.subheader("What to annotate")
        names = list(datasets)
        kept = st.query_params.get("dataset")  # a reload keeps the dataset
        ds = st.selectbox("Dataset", names, key="annotate_dataset",
                          index=names.index(kept) if kept in names else _role_default(datasets),
                          format_func=lambda n: f"{n} ({datasets[n]})")
        if st.query_params.get("dataset") != ds:
            st.query_params["dataset"] = ds
        exps = live_experiments(eng, dataset=ds)
        if not exps and creator:
            prefs = load_prefs(eng)
            try:
                _create(dataset=ds, n=prefs.n, k=prefs.k, machine=prefs.generator, checker=prefs.checker,
                        base_url=prefs.base_url or None, temperature=prefs.generator_temperature,
                        max_tokens=prefs.generator_max_tokens)
            except (LiveError, AccessDenied) as err:
                st.error(ui.escape_md(str(err)))
                return None
            exps = live_experiments(eng, dataset=ds)
    if not exps:
        st.info("There is no live experiment on this dataset yet: ask a researcher or an admin to create one.")
        return None
    with st.sidebar:
        by_id = {e.id: e for e in exps}
        pending = S.pop("annotate_select_experiment", None)
        if pending is not None and pending[0] == ds and pending[1] in by_id:
            S[f"annotate_experiment_{ds}"] = pending[1]
        eid = st.selectbox("Experiment", list(by_id), key=f"annotate_experiment_{ds}",
                           format_func=lambda i: by_id[i].name)
        info = by_id[eid]
        slot = st.empty()  # filled at the end of the run, after its steps: it never lags
        st.caption(f"Machine: {ui.escape_md(machine_name(info.machine))} · n = {info.n}, k = {info.k} · "
                   + prepared_note(info.prepare))
        # annotators neither see the form nor may create (pxp.team.access.create_live_as); a switch, not an
        # expander: a closed expander's form would still be drawn on every run
        if creator and st.toggle("New live experiment", key="annotate_new_exp_open"):
            new_experiment_form(ds)
    return int(eid), slot


def _create(*, dataset: str, **config: Any) -> int:
    """A live experiment created as the user (refused below researcher, audited either way)."""
    return create_live_as(resources.engine(), role=auth.current_role() or None, actor=auth.actor(),
                          dataset=dataset, **config)


def prepared_note(depth: int) -> str:
    """What the experiment prepares ahead, in words (README "The app": the next case is prepared)."""
    if depth <= 0:
        return "next case not prepared ahead (the machine answers when you reach it)"
    return "next case prepared ahead" if depth == 1 else f"next {depth} cases prepared ahead"


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
    with st.form("annotate_new_exp", border=False, enter_to_submit=False):
        name = st.text_input("Name (optional)", key="annotate_new_exp_name")
        c1, c2 = st.columns(2)
        n = c1.number_input("n: messages per session", 2, 50, prefs.n, key="annotate_new_exp_n")
        k = c2.number_input("k: REJECT allowed after", 1, 50, prefs.k, key="annotate_new_exp_k")
        machine = st.text_input("Machine agent", prefs.generator, key="annotate_new_exp_machine",
                                help="simulated, or provider:model such as anthropic:claude-sonnet-4-6")
        shuffle = st.checkbox("Shuffle the cases", key="annotate_new_exp_shuffle")
        overlap = st.number_input("Annotators per case (overlap)", 1, 20, 1, key="annotate_new_exp_overlap",
                                  help="Each case is annotated by this many different people, none twice")
        prepare = st.number_input("Cases prepared ahead", 0, MAX_PREPARE, 1, key="annotate_new_exp_prepare",
                                  help="The machine's opening message of each annotator's next cases is produced "
                                  "in the background while they work; 0 turns this off")
        lists = st.file_uploader("Case lists (optional CSV: annotator, instance)", type=["csv"],
                                 key="annotate_new_exp_lists",
                                 help="Each listed annotator is served only their cases; others none")
        if st.form_submit_button("Create"):
            try:
                case_lists = read_case_lists(lists.getvalue()) if lists is not None else None
                eid = _create(dataset=dataset, name=name, n=int(n), k=int(k), overlap=int(overlap),
                              prepare=int(prepare), case_lists=case_lists, machine=machine.strip() or "simulated",
                              checker=prefs.checker, base_url=prefs.base_url or None, shuffle=shuffle,
                              temperature=prefs.generator_temperature, max_tokens=prefs.generator_max_tokens)
            except (LiveError, AccessDenied) as err:
                st.error(ui.escape_md(str(err)))
                return
            S["annotate_select_experiment"] = (dataset, eid)  # selected on the next run
            S.pop("annotate_sid", None)
            S.pop("annotate_new_exp_open", None)  # the form closes
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
