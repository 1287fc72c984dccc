"""The Annotate sidebar: who is annotating, which dataset and live experiment, progress,
abandoned cases to take over (DESIGN §1; live sessions from pxp.running.live).
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from pxp.app import resources, ui
from pxp.app.annotate.keys import S
from pxp.app.data import dataset_choices
from pxp.app.prefs import load_prefs
from pxp.running.live import (
    LiveError,
    abandoned_sessions,
    create_live_experiment,
    ensure_annotator,
    live_experiments,
    machine_name,
    take_over,
)

ROLES = ["Radiologist", "Chemist", "Other expert"]


def identity() -> int | None:
    """Who is annotating: OIDC login when configured, else a name and a role."""
    with st.sidebar:
        st.subheader("Who are you?")
        if resources.auth_configured():
            if not st.user.is_logged_in:
                st.button("Log in", on_click=st.login, type="primary")
                return None
            name = str(st.user.get("name") or st.user.get("email") or "")
            st.caption(f"Logged in as {ui.escape_md(name)}")
            st.button("Log out", on_click=st.logout)
        else:
            name = st.text_input("Your name", key="annotate_name", placeholder="e.g. Dr. Rao")
        role = st.selectbox("Your role", ROLES, key="annotate_role",
                            on_change=_role_changed)
    if not name.strip():
        return None
    try:
        return ensure_annotator(resources.engine(), name=name, role=role)
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


def choose_experiment() -> tuple[int, DeltaGenerator] | None:
    """The dataset and live experiment to work on (a default one is made when none exists)."""
    eng = resources.engine()
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
        st.progress(info.finished / info.instances if info.instances else 0.0,
                    text=f"{info.finished} of {info.instances} cases done")


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
        if st.form_submit_button("Create"):
            try:
                eid = create_live_experiment(eng, dataset=dataset, name=name, n=int(n), k=int(k),
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
