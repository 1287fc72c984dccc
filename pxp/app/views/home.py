"""Home: what pxp is, and one click to start annotating."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pxp.app import resources
from pxp.app.data import datasets_table, experiments_table
from pxp.app.prefs import load_prefs
from pxp.running.live.assignment import machine_name


def render() -> None:
    eng = resources.engine()
    st.title("PXP: talk a case through with the machine")
    st.markdown(
        "You and a machine agent take turns on one case: it predicts and explains, you "
        "**ratify**, **refute**, **revise** or **reject**. pxp records every message and shows "
        "how *intelligible* the conversation was (one-way, two-way, strong, ultra-strong)."
    )
    prefs = load_prefs(eng)
    ds = datasets_table(eng)
    exps = experiments_table(eng)
    c1, c2, c3 = st.columns(3)
    c1.metric("Datasets", len(ds))
    c2.metric("Instances", int(ds["instances"].sum()) if len(ds) else 0)
    c3.metric("Experiments", len(exps))
    st.page_link(str(Path(__file__).parent / "annotate.py"), label="Start annotating", icon=":material/edit_note:")
    st.page_link(str(Path(__file__).parent / "sessions.py"), label="Browse sessions", icon=":material/forum:")
    st.page_link(str(Path(__file__).parent / "experiments.py"), label="Run an experiment", icon=":material/science:")
    if (Path(__file__).parent / "analytics.py").exists():
        st.page_link(str(Path(__file__).parent / "analytics.py"), label="See how intelligible it was",
                     icon=":material/insights:")
    if prefs.generator == "simulated":
        st.info("The machine agent is the **Simulated agent**: an offline stand-in for an LLM, "
                "so no API key is needed. Choose an LLM on the Settings page.",
                icon=":material/smart_toy:")
    else:
        st.caption(f"Machine agent: {machine_name(prefs.generator)}")
    if len(ds):
        st.subheader("Datasets")
        st.dataframe(ds[["name", "task", "instances", "synthetic"]], hide_index=True)


render()
