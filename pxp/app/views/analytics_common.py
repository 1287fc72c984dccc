"""The Analytics page's shared parts (docs/research.md, Analytics; split from pxp/app/views/analytics.py, a page kept
under 400 lines): the filters, CSV downloads and Table 1 per column. Not a page: imported by the
page's view groups (analytics_paper, analytics_research)."""

from __future__ import annotations

import shlex
from datetime import date
from typing import Any

import pandas as pd
import streamlit as st

from pxp.analysis.queries import Options, Selection
from pxp.app import ui
from pxp.app.analytics_data import COLUMNS, Request, request
from pxp.app.download import download
from pxp.app.selection import format_ids, initial_experiments

FIG1_DEFAULT = ["one_way_human", "one_way_machine", "two_way"]
S = st.session_state

#: the Analytics page's views, in its order (kept here, not in the page script, which renders when imported)
VIEWS = ("Table 1", "Figure 1", "Figure 2", "Transitions", "Session lengths", "Labels", "Annotators",
         "LLM cost", "Per-session flags", "Compare", "Common ground")


def csv_text(df: pd.DataFrame) -> str:
    """A frame as CSV text (the downloads)."""
    return str(df.to_csv(index=False))


def download_csv(label: str, df: pd.DataFrame, file_name: str, key: str) -> None:
    """A CSV download that reaches only this session (pxp.app.download)."""
    download(label, csv_text(df), file_name=file_name, mime="text/csv", key=key)


def filters(opts: Options) -> Request:
    """The page's filters: what they ask for (the selection, the column grouping, the chosen experiments' names)."""
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
    return request(opts, chosen, columns, datasets=datasets, repetitions=reps, annotators=anns, labels=labels,
                   since=since if isinstance(since, date) else None, until=until if isinstance(until, date) else None)


def pin_first(df: pd.DataFrame) -> dict[str, Any]:
    """Column config keeping the first column in view while a wide table scrolls sideways."""
    return {str(df.columns[0]): st.column_config.Column(pinned=True)} if len(df.columns) else {}


#: a table up to this size is drawn as text (no data grid to load: the view opens sooner); a larger one
#: in the data grid, its first column kept in view
SMALL_COLUMNS, SMALL_ROWS = 5, 40


def paper_table(df: pd.DataFrame, key: str) -> None:
    """A table like the papers' (Table 1): as text when small, else in the data grid."""
    if len(df.columns) <= SMALL_COLUMNS and len(df) <= SMALL_ROWS:
        ui.small_table(df)
    else:
        st.dataframe(df, hide_index=True, key=key, column_config=pin_first(df))


def is_filtered(sel: Selection) -> bool:
    return bool(sel.datasets or sel.repetitions or sel.annotators or sel.labels or sel.since or sel.until)


def reproduce_line(sel: Selection, by: str | None, names: list[str]) -> None:
    """The CLI line that prints the same table (exact for whole experiments, one column each), as plain text
    (st.code would load a syntax highlighter, the largest script of the page)."""
    if not names:
        return
    line = "pxp report " + " ".join(f"--experiment {shlex.quote(n)}" for n in names)
    if by not in (None, "experiment"):
        line += f" --by {by}"
    st.caption("Reproduce this table")
    st.text(line + " --format markdown")
    if by is None or is_filtered(sel):
        st.caption("The command counts whole experiments; the filters above and pooling are not part of it.")


