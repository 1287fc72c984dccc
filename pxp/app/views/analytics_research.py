"""The Analytics page's views researchers ask for (docs/research.md, Analytics): per-label breakdowns, annotators and
their agreement, LLM cost, per-session flags and the common-ground probe. Not a page:
pxp/app/views/analytics.py calls them."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from pxp.analysis import figures
from pxp.analysis.agreement import Agreement, agreement_frame
from pxp.analysis.common_ground import probe_frame
from pxp.analysis.tables import breakdown_display, breakdown_frame, session_frame, to_parquet
from pxp.app import resources, ui
from pxp.app.analytics_data import WHICH, Request, annotators_view, breakdown, costs_view, flags_view
from pxp.app.download import download
from pxp.app.views.analytics_common import csv_text, download_csv, pin_first
from pxp.protocols.pxp.intelligibility import Table1


def view_breakdown(tables: dict[str, Table1], by: str, what: str) -> pd.DataFrame:
    df = breakdown_frame(tables, name=by)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return df
    st.caption(f"Which {what} end intelligible: Table 1 per {by}, medians over repetitions.")
    shown = breakdown_display(df)
    ui.table(shown, hide_index=True, key=f"analytics_breakdown_{by}", column_config=pin_first(shown))
    download_csv(f"Per {by} (CSV)", df, f"by_{by}.csv", f"analytics_dl_{by}")
    return df


def view_labels(req: Request) -> None:
    """Per label: RAD's diagnoses; DRUG datasets carry no label, and the page says so."""
    df = view_breakdown(breakdown(resources.engine(), req, "label"), "label", "labels (diagnoses)")
    chosen = set(req.sel.experiments)
    tasks = {str(e["task"]) for e in req.opts.experiments if not chosen or e["id"] in chosen}
    if "drug" in tasks:
        st.info("DRUG (retrosynthesis) cases have no label: the study's CSV names a target and its reactants, "
                "not a reaction type, so their sessions are counted under “(none)”.")
    elif not df.empty and "(none)" in set(df.iloc[:, 0].astype(str)):
        st.caption("“(none)”: instances imported without a label.")


def view_annotators(req: Request) -> None:
    top = st.container()  # Table 1 per annotator, drawn once the agreement's radio below is read
    st.subheader("Inter-annotator agreement")
    which = st.radio("Compare each annotator's", WHICH, horizontal=True, key="analytics_kappa_which",
                     format_func=lambda w: {"first": "first tag (the reply to INIT)",
                                            "last": "last tag (the final verdict)"}[w])
    data = annotators_view(resources.engine(), req, which=which or WHICH[0])
    with top:
        view_breakdown(data.tables, "annotator", "annotators' sessions")
    if not data.agreement:
        st.info("No instance was annotated by two annotators in this selection.")
        return
    view_kappa(data.agreement)
    view_agreement(data.report, data.disagreements)


def view_kappa(ag: list[Agreement]) -> None:
    df = pd.DataFrame([{"annotator A": a.annotator_a, "annotator B": a.annotator_b, "instances": a.instances,
                        "observed agreement": round(a.observed, 4),
                        "Cohen's κ": None if a.kappa is None else round(a.kappa, 4)} for a in ag])
    ui.table(df, hide_index=True, key="analytics_kappa")
    st.caption("Cohen's κ on the human tags of the instances both annotators saw (their earliest session on "
               "each); empty when undefined (both always gave the same tag).")
    download_csv("Agreement (CSV)", df, "agreement.csv", "analytics_dl_kappa")


def view_agreement(report: dict[str, Any], dis: pd.DataFrame) -> None:
    """κ per pair and α over all annotators on the first tag, match, agree and final prediction;
    the cases where two annotators differ, with both sessions (pxp.analysis.agreement)."""
    st.subheader("Agreement on tag, match, agree and prediction")
    df = agreement_frame(report)
    ui.table(df, hide_index=True, key="analytics_agreement")
    st.caption("tag: the first human tag; match, agree: the human's judgements in that first reply; prediction: the "
               "human's final prediction. Cohen's κ per pair over the cases both saw; Krippendorff's α (nominal) over "
               "all annotators; empty when undefined. Same numbers: `pxp report --experiment X --agreement`.")
    st.subheader(f"Disagreements ({len(dis)})")
    if dis.empty:
        return
    shown, links = ui.session_links(dis, ("session_a", "session_b"))
    ui.table(shown, hide_index=True, column_config=links, key="analytics_disagreements")
    st.caption("Each session id opens that session on the Sessions page.")
    download_csv("Disagreements (CSV)", dis, "disagreements.csv", "analytics_dl_disagreements")


def view_costs(req: Request) -> None:
    df, summary = costs_view(resources.engine(), req)
    if df.empty and summary.empty:
        st.info("No LLM calls recorded for this selection (the simulated machine makes none).")
        return
    if not df.empty:
        c = st.columns(4)
        c[0].metric("Sessions with calls", f"{len(df):,}")
        cost = df.cost_usd.dropna()
        c[1].metric("Cost per session (median)", f"${cost.median():.4f}" if len(cost) else "n/a")
        c[2].metric("Latency per session (median)", f"{df.latency_ms.median() / 1000:.2f} s")
        c[3].metric("Calls per session (median)", f"{df.calls.median():g}")
        st.vega_lite_chart(figures.latency(df), key="analytics_cost_fig")
        ui.table(df, counts=["calls", "tokens_in", "tokens_out", "cache_read", "errors"], hide_index=True,
                 key="analytics_cost_sessions")
        download_csv("Per session (CSV)", df, "llm_per_session.csv", "analytics_dl_costs")
    st.caption("All calls of the selected experiments by provider, model and purpose (including evaluations).")
    if no_usage := int(summary["no_usage"].fillna(0).sum()) if not summary.empty else 0:
        st.caption(f"{no_usage:,} of {int(summary['calls'].sum()):,} call(s) had no usage: the server sent no "
                   "token counts, so their tokens and cost are unknown (—), not zero.")
    ui.table(summary, counts=["calls", "tokens_in", "tokens_out", "errors", "no_usage"], hide_index=True,
             key="analytics_cost_summary")
    download_csv("By model and purpose (CSV)", summary, "llm_summary.csv", "analytics_dl_cost_summary")


def view_sessions(req: Request) -> None:
    engine, sel = resources.engine(), req.sel
    df = flags_view(engine, req)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    st.caption(f"{len(df)} sessions with their seven Table 1 properties" +
               (" (the first 1,000 shown; the downloads hold all)." if len(df) > 1000 else "."))
    ui.table(df.head(1000), hide_index=True, key="analytics_sessions", column_config=pin_first(df))
    c = st.columns(2)
    with c[0]:
        download("Per-session flags (CSV)", lambda: csv_text(session_frame(engine, sel)),
                 file_name="session_flags.csv", mime="text/csv", key="analytics_dl_flags_csv")
    with c[1]:
        download("Per-session flags (Parquet)", lambda: to_parquet(session_frame(engine, sel)),
                 file_name="session_flags.parquet", mime="application/vnd.apache.parquet",
                 key="analytics_dl_flags_parquet")


def view_common_ground(req: Request) -> None:
    """Probe accuracy against one-way intelligibility per session (the common-ground probe, docs/research.md,
    Common-ground probe)."""
    ids = list(req.sel.experiments) or [int(e["id"]) for e in req.opts.experiments]
    df = probe_frame(resources.engine(), ids)
    if df.empty:
        st.info("No common-ground probes in this selection: run an experiment with `pxp run --probe`.")
        return
    st.vega_lite_chart(figures.probe_strip(df), key="analytics_cg_fig")
    st.caption("Each point a probed session: its probe accuracy (invalid replies count as wrong) against "
               "whether the session is one-way intelligible for the human; κ per session in the table.")
    ui.table(df, hide_index=True, key="analytics_cg")
    download_csv("Common ground (CSV)", df, "common_ground.csv", "analytics_dl_cg")


