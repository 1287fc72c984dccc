"""Home: what pxp is, and one click to start annotating; links only to the pages the role may open."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pxp.app import resources, ui
from pxp.app.data import datasets_table, experiments_table
from pxp.app.prefs import load_prefs
from pxp.app.router import can_open
from pxp.running.pxp.live.assignment import machine_name

HERE = Path(__file__).parent
#: Home's links: (page in views/, label, icon)
LINKS = (
    ("annotate.py", "Start annotating", ":material/edit_note:"),
    ("sessions.py", "Browse sessions", ":material/forum:"),
    ("experiments.py", "Run an experiment", ":material/science:"),
    ("analytics.py", "See how intelligible it was", ":material/insights:"),
)


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
    for page, label, icon in LINKS:  # only the pages this role may open (router.NEEDS)
        if (HERE / page).exists() and can_open(page):
            st.page_link(str(HERE / page), label=label, icon=icon)
    if prefs.generator == "simulated":
        choose = " Choose an LLM on the Settings page." if can_open("settings.py") else ""
        st.info(ui.SIMULATED_SAYS + choose, icon=":material/smart_toy:")
    else:
        st.caption(f"Machine agent: {ui.escape_md(machine_name(prefs.generator))}")
    if len(ds):
        st.subheader("Datasets")
        ui.table(ds[["name", "task", "instances", "synthetic"]], hide_index=True)


render()
