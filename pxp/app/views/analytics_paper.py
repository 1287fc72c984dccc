"""The Analytics page's views of the papers (docs/research.md, Analytics): Table 1, Figures 1 and 2, tag transitions
and session lengths. Not a page: pxp/app/views/analytics.py calls them."""

from __future__ import annotations

import streamlit as st

from pxp.analysis import figures
from pxp.analysis.performance import performance_median
from pxp.analysis.report import reasons_line, render_many
from pxp.analysis.tables import figure1_csv_frame, repetition_frame, table1_frame, transition_matrix
from pxp.app import resources, ui
from pxp.app.analytics_data import (
    SPLITS,
    Request,
    figure2_view,
    lengths_view,
    table1_view,
    tables,
    transitions_view,
)
from pxp.app.download import download
from pxp.app.views.analytics_common import (
    FIG1_DEFAULT,
    download_csv,
    paper_table,
    reproduce_line,
)
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, METRICS


def view_table1(req: Request) -> None:
    sel, by, names = req.sel, req.by, req.names
    found, reasons = table1_view(resources.engine(), req)
    if not found:
        st.info("No finished or aborted sessions in this selection yet: nothing to count.")
        reproduce_line(sel, by, names)
        return
    df = table1_frame(found)
    paper_table(df, "analytics_table1")
    st.caption("count (proportion of total sessions): the median over repetitions, min–max over repetitions. "
               "Aborted sessions count in the total, are never intelligible, and are shown apart. "
               "Open sessions are not counted.")
    if reasons:
        st.caption(f"Aborted sessions by reason (all repetitions): {reasons_line(reasons)}.")
    reports = [t.as_json(name) for name, t in found.items()]
    c = st.columns(4)
    with c[0]:
        download("Table (CSV)", render_many(reports, "csv"), file_name="table1.csv", mime="text/csv",
                 key="analytics_dl_table_csv")
    with c[1]:
        download("Table (Markdown)", render_many(reports, "markdown"), file_name="table1.md",
                 mime="text/markdown", key="analytics_dl_table_md")
    with c[2]:
        download("Table (JSON)", render_many(reports, "json"), file_name="table1.json",
                 mime="application/json", key="analytics_dl_table_json")
    reproduce_line(sel, by, names)
    if st.toggle("Counts per repetition (what the medians are of)", key="analytics_reps"):
        reps = repetition_frame(resources.engine(), sel, by)
        ui.table(reps, hide_index=True)
        download_csv("Per repetition (CSV)", reps, "table1_repetitions.csv", "analytics_dl_reps")


def view_figure1(req: Request) -> None:
    found = tables(resources.engine(), req)
    metrics = st.multiselect("Curves", list(METRICS), default=FIG1_DEFAULT, format_func=lambda m: METRIC_LABELS[m],
                             key="analytics_fig1_metrics")
    if not found:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    totals = {name: t.total_sessions for name, t in found.items()}
    differ = len(set(totals.values())) > 1
    # side by side, counts of different totals mislead (30 sessions vs 15 looks like half): proportions by default
    proportion = st.toggle("Proportions of total sessions", value=differ,
                           key="analytics_fig1_proportion" + ("_differ" if differ else ""))
    st.vega_lite_chart(figures.figure1(found, metrics or FIG1_DEFAULT, proportion=proportion), key="analytics_fig1")
    st.caption("Sessions with the property when each session is cut to its first j messages: the median over "
               "repetitions, and their least and greatest as error bars, or as a band above "
               f"{figures.BAND_ABOVE} bounds (the follow-up paper's Figure 1).")
    if differ:
        st.caption(("Shown as proportions: " if proportion else "Counts of different totals do not compare: ") +
                   "the session totals differ (" + ", ".join(f"{ui.escape_md(n)} {t:g}" for n, t in totals.items())
                   + ").")
    data = figure1_csv_frame(found)  # the curves' numbers: the figure's text alternative and its download
    ui.chart_table("Figure 1", data, "analytics_fig1_table")
    download_csv("Figure 1 data (CSV)", data, "figure1.csv", "analytics_dl_fig1")


def view_figure2(req: Request) -> None:
    split = st.selectbox("Evaluated on", SPLITS, key="analytics_fig2_split")
    df = figure2_view(resources.engine(), req, split=split or SPLITS[0])
    if df.empty:
        st.info("No machine-performance evaluations for this selection: controlled runs record them after "
                "each session.")
        return
    st.vega_lite_chart(figures.figure2(df), key="analytics_fig2")
    st.caption("Prediction, explanation and both-correct accuracy after each session processed: thin lines "
               "per repetition, thick lines the median (the follow-up paper's Figure 2).")
    ui.chart_table("Figure 2's medians", performance_median(df), "analytics_fig2_table")
    c = st.columns(2)
    with c[0]:
        download_csv("Figure 2 data (CSV)", df, "figure2.csv", "analytics_dl_fig2")
    with c[1]:
        download_csv("Medians (CSV)", performance_median(df), "figure2_median.csv",
                     "analytics_dl_fig2_median")


def view_transitions(req: Request) -> None:
    df = transitions_view(resources.engine(), req)
    if df.empty:
        st.info("No messages in this selection yet.")
        return
    mat = transition_matrix(df)
    st.caption("Rows: the sender and tag of message j−1; columns: the tag that answered it (message j).")
    st.dataframe(mat, key="analytics_transitions")
    st.vega_lite_chart(figures.transitions(mat), key="analytics_transitions_fig")
    download_csv("Transitions (CSV)", df, "transitions.csv", "analytics_dl_transitions")


def view_lengths(req: Request) -> None:
    df = lengths_view(resources.engine(), req)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    st.vega_lite_chart(figures.lengths(df), key="analytics_len_fig")
    ui.table(df, hide_index=True)
    download_csv("Session lengths (CSV)", df, "session_lengths.csv", "analytics_dl_lengths")


