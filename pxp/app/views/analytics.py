"""Analytics: the papers' Table 1 and Figures 1–2, side-by-side comparisons, the views
researchers ask for, and downloads (DESIGN §2; issue 7).

Render functions only. Every number comes from pxp.analysis (queries, tables, performance,
costs, agreement: aggregated in SQL, cached by data version), the code path `pxp report`
prints; untrusted names are shown as text.
"""

from __future__ import annotations

import shlex
from datetime import date
from typing import Any

import pandas as pd
import streamlit as st

from pxp.analysis import figures
from pxp.analysis.agreement import agreement, agreement_frame, agreement_report, disagreements
from pxp.analysis.common_ground import probe_frame
from pxp.analysis.costs import llm_costs, llm_summary
from pxp.analysis.performance import evaluations, performance_median
from pxp.analysis.queries import Options, Selection, options
from pxp.analysis.report import render_many
from pxp.analysis.tables import (
    breakdown_display,
    breakdown_frame,
    figure1_frame,
    repetition_frame,
    session_frame,
    session_lengths,
    table1,
    table1_by,
    table1_frame,
    tag_transitions,
    to_parquet,
    transition_matrix,
)
from pxp.app import resources, ui
from pxp.app.compare import view_compare
from pxp.app.selection import format_ids, initial_experiments
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, METRICS, Table1

VIEWS = ("Table 1", "Figure 1", "Figure 2", "Transitions", "Session lengths", "Labels", "Annotators",
         "LLM cost", "Per-session flags", "Compare", "Common ground")
COLUMNS = {
    "experiment": "one column per experiment",
    "annotator": "one column per annotator (h1 vs h2)",
    "label": "one column per label",
    "dataset": "one column per dataset",
    "pooled": "everything selected in one column",
}
FIG1_DEFAULT = ["one_way_human", "one_way_machine", "two_way"]
S = st.session_state


def _csv(df: pd.DataFrame) -> str:
    return str(df.to_csv(index=False))


def download_csv(label: str, df: pd.DataFrame, file_name: str, key: str) -> None:
    st.download_button(label, _csv(df), file_name=file_name, mime="text/csv", key=key, on_click="ignore",
                       icon=":material/download:")


def filters(opts: Options) -> tuple[Selection, str | None, list[str]]:
    """The page's filters; returns the selection, the column grouping and the chosen experiment names."""
    names = {e["id"]: e["name"] for e in opts.experiments}
    top = st.columns([3, 2])
    if "analytics_experiments" not in S or any(i not in names for i in S["analytics_experiments"]):
        S["analytics_experiments"] = initial_experiments(opts.experiments, st.query_params.get("exp"),
                                                         S.get("analytics_keep_experiments"))
    chosen = top[0].multiselect(
        "Experiments", list(names), format_func=lambda i: names.get(i, f"experiment {i}"),
        key="analytics_experiments", placeholder="all experiments",
    )
    S["analytics_keep_experiments"] = list(chosen)  # kept across visits (widget state is not)
    st.query_params["exp"] = format_ids(chosen)
    columns = top[1].selectbox("Columns", list(COLUMNS), format_func=lambda c: COLUMNS[c], key="analytics_columns")
    with st.expander("Filters: dataset, repetition, annotator, label, date"):
        c = st.columns(4)
        dnames = {d["id"]: d["name"] for d in opts.datasets}
        datasets = c[0].multiselect("Dataset", list(dnames), format_func=lambda i: dnames.get(i, f"dataset {i}"),
                                    key="analytics_datasets", placeholder="all")
        reps = c[1].multiselect("Repetition", opts.repetitions, key="analytics_repetitions", placeholder="all")
        anames = {a["id"]: a["name"] for a in opts.annotators}
        anns = c[2].multiselect("Annotator", list(anames), format_func=lambda i: anames.get(i, f"annotator {i}"),
                                key="analytics_annotators", placeholder="all")
        labels = c[3].multiselect("Label", opts.labels, key="analytics_labels", placeholder="all")
        d = st.columns(4)
        since = d[0].date_input("Sessions from", value=None, min_value=opts.first_day, max_value=opts.last_day,
                                key="analytics_since")
        until = d[1].date_input("Sessions until", value=None, min_value=opts.first_day, max_value=opts.last_day,
                                key="analytics_until")
    sel = Selection(
        experiments=tuple(sorted(chosen)), datasets=tuple(sorted(datasets)), repetitions=tuple(sorted(reps)),
        annotators=tuple(sorted(anns)), labels=tuple(sorted(labels)),
        since=since if isinstance(since, date) else None, until=until if isinstance(until, date) else None,
    )
    by = None if columns == "pooled" else columns
    return sel, by, [names[i] for i in chosen if i in names]


def pin_first(df: pd.DataFrame) -> dict[str, Any]:
    """Column config keeping the first column in view while a wide table scrolls sideways."""
    return {str(df.columns[0]): st.column_config.Column(pinned=True)} if len(df.columns) else {}


def is_filtered(sel: Selection) -> bool:
    return bool(sel.datasets or sel.repetitions or sel.annotators or sel.labels or sel.since or sel.until)


def tables_for(sel: Selection, by: str | None, names: list[str] | None = None) -> dict[str, Table1]:
    """Table 1 per column; experiment columns in the order they were chosen."""
    engine = resources.engine()
    if by is None:
        t = table1(engine, sel)
        return {"selected": t} if t.repetitions else {}
    tables = {(g or "(none)"): t for g, t in table1_by(engine, sel, by).items()}
    if by == "experiment" and names:
        order = {n: i for i, n in enumerate(names)}
        tables = dict(sorted(tables.items(), key=lambda kv: order.get(kv[0], len(order))))
    return tables


def reproduce_line(sel: Selection, by: str | None, names: list[str]) -> None:
    """The CLI line that prints the same table (exact for whole experiments, one column each)."""
    if not names:
        return
    line = "pxp report " + " ".join(f"--experiment {shlex.quote(n)}" for n in names)
    if by not in (None, "experiment"):
        line += f" --by {by}"
    st.caption("Reproduce this table")
    st.code(line + " --format markdown", language="bash")
    if by is None or is_filtered(sel):
        st.caption("The command counts whole experiments; the filters above and pooling are not part of it.")


def view_table1(sel: Selection, by: str | None, names: list[str]) -> None:
    tables = tables_for(sel, by, names)
    if not tables:
        st.info("No finished or aborted sessions in this selection yet: nothing to count.")
        reproduce_line(sel, by, names)
        return
    df = table1_frame(tables)
    st.dataframe(df, hide_index=True, key="analytics_table1", column_config=pin_first(df))
    st.caption("count (proportion of total sessions): the median over repetitions, min–max over repetitions. "
               "Aborted sessions count in the total, are never intelligible, and are shown apart. "
               "Open sessions are not counted.")
    reports = [t.as_json(name) for name, t in tables.items()]
    c = st.columns(4)
    with c[0]:
        st.download_button("Table (CSV)", render_many(reports, "csv"), file_name="table1.csv", mime="text/csv",
                           key="analytics_dl_table_csv", on_click="ignore", icon=":material/download:")
    with c[1]:
        st.download_button("Table (Markdown)", render_many(reports, "markdown"), file_name="table1.md",
                           mime="text/markdown", key="analytics_dl_table_md", on_click="ignore",
                           icon=":material/download:")
    with c[2]:
        st.download_button("Table (JSON)", render_many(reports, "json"), file_name="table1.json",
                           mime="application/json", key="analytics_dl_table_json", on_click="ignore",
                           icon=":material/download:")
    reproduce_line(sel, by, names)
    with st.expander("Counts per repetition (what the medians are of)"):
        reps = repetition_frame(resources.engine(), sel, by)
        st.dataframe(reps, hide_index=True)
        download_csv("Per repetition (CSV)", reps, "table1_repetitions.csv", "analytics_dl_reps")


def view_figure1(sel: Selection, by: str | None, names: list[str]) -> None:
    tables = tables_for(sel, by, names)
    metrics = st.multiselect("Curves", list(METRICS), default=FIG1_DEFAULT, format_func=lambda m: METRIC_LABELS[m],
                             key="analytics_fig1_metrics")
    if not tables:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    proportion = st.toggle("Proportions of total sessions", key="analytics_fig1_proportion")
    st.plotly_chart(figures.figure1(tables, metrics or FIG1_DEFAULT, proportion=proportion), key="analytics_fig1")
    st.caption("Sessions with the property when each session is cut to its first j messages: the median over "
               "repetitions, error bars min–max (the follow-up paper's Figure 1).")
    data = pd.concat([figure1_frame(t, name) for name, t in tables.items()], ignore_index=True)
    download_csv("Figure 1 data (CSV)", data, "figure1.csv", "analytics_dl_fig1")


def view_figure2(sel: Selection) -> None:
    split = st.selectbox("Evaluated on", ["test", "val", "train"], key="analytics_fig2_split")
    df = evaluations(resources.engine(), sel, split=split)
    if df.empty:
        st.info("No machine-performance evaluations for this selection: controlled runs record them after "
                "each session.")
        return
    st.plotly_chart(figures.figure2(df), key="analytics_fig2")
    st.caption("Prediction, explanation and both-correct accuracy after each session processed: thin lines "
               "per repetition, thick lines the median (the follow-up paper's Figure 2).")
    c = st.columns(2)
    with c[0]:
        download_csv("Figure 2 data (CSV)", df, "figure2.csv", "analytics_dl_fig2")
    with c[1]:
        download_csv("Medians (CSV)", performance_median(df), "figure2_median.csv",
                     "analytics_dl_fig2_median")


def view_transitions(sel: Selection) -> None:
    df = tag_transitions(resources.engine(), sel)
    if df.empty:
        st.info("No messages in this selection yet.")
        return
    mat = transition_matrix(df)
    st.caption("Rows: the sender and tag of message j−1; columns: the tag that answered it (message j).")
    st.dataframe(mat, key="analytics_transitions")
    import plotly.express as px

    st.plotly_chart(px.imshow(mat, text_auto=True, color_continuous_scale="Blues",
                              labels={"x": "answered with", "y": "message j−1", "color": "messages"}),
                    key="analytics_transitions_fig")
    download_csv("Transitions (CSV)", df, "transitions.csv", "analytics_dl_transitions")


def view_lengths(sel: Selection) -> None:
    df = session_lengths(resources.engine(), sel)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    import plotly.express as px

    d = df.assign(ended=df.stop_reason.where(df.status != "aborted", "aborted").replace("", "(none)"))
    st.plotly_chart(px.bar(d, x="messages", y="sessions", color="ended", barmode="stack"), key="analytics_len_fig")
    st.dataframe(df, hide_index=True)
    download_csv("Session lengths (CSV)", df, "session_lengths.csv", "analytics_dl_lengths")


def view_breakdown(sel: Selection, by: str, what: str) -> pd.DataFrame:
    tables = table1_by(resources.engine(), sel, by)
    df = breakdown_frame({(g or "(none)"): t for g, t in tables.items()}, name=by)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return df
    st.caption(f"Which {what} end intelligible: Table 1 per {by}, medians over repetitions.")
    shown = breakdown_display(df)
    st.dataframe(shown, hide_index=True, key=f"analytics_breakdown_{by}", column_config=pin_first(shown))
    download_csv(f"Per {by} (CSV)", df, f"by_{by}.csv", f"analytics_dl_{by}")
    return df


def view_labels(sel: Selection, opts: Options) -> None:
    """Per label: RAD's diagnoses; DRUG datasets carry no label, and the page says so."""
    df = view_breakdown(sel, "label", "labels (diagnoses)")
    chosen = set(sel.experiments)
    tasks = {str(e["task"]) for e in opts.experiments if not chosen or e["id"] in chosen}
    if "drug" in tasks:
        st.info("DRUG (retrosynthesis) cases have no label: the study's CSV names a target and its reactants, "
                "not a reaction type, so their sessions are counted under “(none)”.")
    elif not df.empty and "(none)" in set(df.iloc[:, 0].astype(str)):
        st.caption("“(none)”: instances imported without a label.")


def view_annotators(sel: Selection) -> None:
    view_breakdown(sel, "annotator", "annotators' sessions")
    st.subheader("Inter-annotator agreement")
    which = st.radio("Compare each annotator's", ["first", "last"], horizontal=True, key="analytics_kappa_which",
                     format_func=lambda w: {"first": "first tag (the reply to INIT)",
                                            "last": "last tag (the final verdict)"}[w])
    ag = agreement(resources.engine(), sel, which=which)
    if not ag:
        st.info("No instance was annotated by two annotators in this selection.")
        return
    df = pd.DataFrame([{"annotator A": a.annotator_a, "annotator B": a.annotator_b, "instances": a.instances,
                        "observed agreement": round(a.observed, 4),
                        "Cohen's κ": None if a.kappa is None else round(a.kappa, 4)} for a in ag])
    st.dataframe(df, hide_index=True, key="analytics_kappa")
    st.caption("Cohen's κ on the human tags of the instances both annotators saw (their earliest session on "
               "each); empty when undefined (both always gave the same tag).")
    download_csv("Agreement (CSV)", df, "agreement.csv", "analytics_dl_kappa")
    view_agreement(sel)


def view_agreement(sel: Selection) -> None:
    """κ per pair and α over all annotators on the first tag, match, agree and final prediction;
    the cases where two annotators differ, with both sessions (pxp.analysis.agreement)."""
    st.subheader("Agreement on tag, match, agree and prediction")
    engine = resources.engine()
    df = agreement_frame(agreement_report(engine, sel))
    st.dataframe(df, hide_index=True, key="analytics_agreement")
    st.caption("tag: the first human tag; match, agree: the human's judgements in that first reply; prediction: the "
               "human's final prediction. Cohen's κ per pair over the cases both saw; Krippendorff's α (nominal) over "
               "all annotators; empty when undefined. Same numbers: `pxp report --experiment X --agreement`.")
    dis = disagreements(engine, sel)
    st.subheader(f"Disagreements ({len(dis)})")
    if dis.empty:
        return
    shown, links = ui.session_links(dis, ("session_a", "session_b"))
    st.dataframe(shown, hide_index=True, column_config=links, key="analytics_disagreements")
    st.caption("Each session id opens that session on the Sessions page.")
    download_csv("Disagreements (CSV)", dis, "disagreements.csv", "analytics_dl_disagreements")


def view_costs(sel: Selection) -> None:
    engine = resources.engine()
    df = llm_costs(engine, sel)
    summary = llm_summary(engine, sel)
    if df.empty and summary.empty:
        st.info("No LLM calls recorded for this selection (the simulated machine makes none).")
        return
    if not df.empty:
        c = st.columns(4)
        c[0].metric("Sessions with calls", len(df))
        cost = df.cost_usd.dropna()
        c[1].metric("Cost per session (median)", f"${cost.median():.4f}" if len(cost) else "n/a")
        c[2].metric("Latency per session (median)", f"{df.latency_ms.median() / 1000:.2f} s")
        c[3].metric("Calls per session (median)", f"{df.calls.median():g}")
        import plotly.express as px

        hist = px.histogram(df.assign(latency_s=df.latency_ms.clip(lower=0) / 1000), x="latency_s", nbins=40,
                            labels={"latency_s": "LLM latency per session (s)"})
        hist.update_traces(xbins={"start": 0})
        hist.update_xaxes(rangemode="nonnegative")
        st.plotly_chart(hist, key="analytics_cost_fig")
        st.dataframe(df, hide_index=True)
        download_csv("Per session (CSV)", df, "llm_per_session.csv", "analytics_dl_costs")
    st.caption("All calls of the selected experiments by provider, model and purpose (including evaluations).")
    st.dataframe(summary, hide_index=True)
    download_csv("By model and purpose (CSV)", summary, "llm_summary.csv", "analytics_dl_cost_summary")


def view_sessions(sel: Selection) -> None:
    engine = resources.engine()
    df = session_frame(engine, sel)
    if df.empty:
        st.info("No finished or aborted sessions in this selection yet.")
        return
    st.caption(f"{len(df)} sessions with their seven Table 1 properties" +
               (" (the first 1,000 shown; the downloads hold all)." if len(df) > 1000 else "."))
    st.dataframe(df.head(1000), hide_index=True, key="analytics_sessions", column_config=pin_first(df))
    c = st.columns(2)
    with c[0]:
        st.download_button("Per-session flags (CSV)", lambda: _csv(session_frame(engine, sel)),
                           file_name="session_flags.csv", mime="text/csv", key="analytics_dl_flags_csv",
                           on_click="ignore", icon=":material/download:")
    with c[1]:
        st.download_button("Per-session flags (Parquet)",
                           lambda: to_parquet(session_frame(engine, sel)),
                           file_name="session_flags.parquet", mime="application/vnd.apache.parquet",
                           key="analytics_dl_flags_parquet", on_click="ignore", icon=":material/download:")


def view_common_ground(sel: Selection, opts: Options) -> None:
    """Probe accuracy against one-way intelligibility per session (the common-ground probe, issue 12 §7)."""
    ids = list(sel.experiments) or [int(e["id"]) for e in opts.experiments]
    df = probe_frame(resources.engine(), ids)
    if df.empty:
        st.info("No common-ground probes in this selection: run an experiment with `pxp run --probe`.")
        return
    import plotly.express as px

    d = df.assign(one_way=df.one_way_human.map({True: "yes", False: "no"}))
    st.plotly_chart(px.strip(d, x="one_way", y="accuracy", color="one_way", hover_data=["repetition", "ordinal",
                                                                                          "kappa"],
                             category_orders={"one_way": ["yes", "no"]},
                             labels={"one_way": "1-way intelligible for the human", "accuracy": "probe accuracy"}),
                    key="analytics_cg_fig")
    st.caption("Each point a probed session: its probe accuracy (invalid replies count as wrong) against "
               "whether the session is one-way intelligible for the human; κ per session in the table.")
    st.dataframe(df, hide_index=True, key="analytics_cg")
    download_csv("Common ground (CSV)", df, "common_ground.csv", "analytics_dl_cg")


def render() -> None:
    st.title("Analytics")
    engine = resources.engine()
    opts = options(engine)
    if not opts.experiments:
        st.info("No experiments yet. Run one on the Experiments page (or `pxp run`), annotate live, or import "
                "transcripts; its Table 1 and figures appear here.")
        return
    sel, by, names = filters(opts)
    if "analytics_view" not in S:
        wanted = st.query_params.get("view") or S.get("analytics_keep_view")
        S["analytics_view"] = wanted if wanted in VIEWS else VIEWS[0]
    view = st.radio("View", VIEWS, horizontal=True, key="analytics_view", label_visibility="collapsed")
    S["analytics_keep_view"] = view
    st.query_params["view"] = view or VIEWS[0]
    if sel.experiments:
        st.caption("Experiments: " + ui.escape_md(", ".join(names)))
    views: dict[str, Any] = {
        "Table 1": lambda: view_table1(sel, by, names),
        "Figure 1": lambda: view_figure1(sel, by, names),
        "Figure 2": lambda: view_figure2(sel),
        "Transitions": lambda: view_transitions(sel),
        "Session lengths": lambda: view_lengths(sel),
        "Labels": lambda: view_labels(sel, opts),
        "Annotators": lambda: view_annotators(sel),
        "LLM cost": lambda: view_costs(sel),
        "Per-session flags": lambda: view_sessions(sel),
        "Compare": lambda: view_compare(opts, names),
        "Common ground": lambda: view_common_ground(sel, opts),
    }
    views[view or "Table 1"]()


render()
