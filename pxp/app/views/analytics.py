"""Analytics: the papers' Table 1 and Figures 1–2, side-by-side comparisons, the views
researchers ask for, and downloads (DESIGN §2; docs/research.md, Analytics).

Render functions only. Every number comes from pxp.analysis (queries, tables, performance,
costs, agreement: aggregated in SQL, cached by data version), the code path `pxp report`
prints; untrusted names are shown as text.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pxp.analysis.queries import options
from pxp.app import resources, ui
from pxp.app.analytics_data import Request
from pxp.app.views.analytics_common import VIEWS, S, filters
from pxp.app.views.analytics_paper import view_figure1, view_figure2, view_lengths, view_table1, view_transitions
from pxp.app.views.analytics_research import (
    view_annotators,
    view_common_ground,
    view_costs,
    view_labels,
    view_sessions,
)


def _compare(req: Request) -> None:
    from pxp.app.views.analytics_compare import view_compare  # scipy, for its tests, loads only when Compare is shown

    view_compare(req)


def render() -> None:
    st.title("Analytics")
    engine = resources.engine()
    opts = options(engine)
    if not opts.experiments:
        st.info("No experiments yet. Run one on the Experiments page (or `pxp run`), annotate live, or import "
                "transcripts; its Table 1 and figures appear here.")
        return
    req = filters(opts)
    if "analytics_view" not in S:
        wanted = st.query_params.get("view") or S.get("analytics_keep_view")
        S["analytics_view"] = wanted if wanted in VIEWS else VIEWS[0]
    view = st.radio("View", VIEWS, horizontal=True, key="analytics_view", label_visibility="collapsed")
    S["analytics_keep_view"] = view
    st.query_params["view"] = view or VIEWS[0]
    if req.sel.experiments:
        st.caption("Experiments: " + ui.escape_md(", ".join(req.names)))
    views: dict[str, Any] = {
        "Table 1": lambda: view_table1(req),
        "Figure 1": lambda: view_figure1(req),
        "Figure 2": lambda: view_figure2(req),
        "Transitions": lambda: view_transitions(req),
        "Session lengths": lambda: view_lengths(req),
        "Labels": lambda: view_labels(req),
        "Annotators": lambda: view_annotators(req),
        "LLM cost": lambda: view_costs(req),
        "Per-session flags": lambda: view_sessions(req),
        "Compare": lambda: _compare(req),
        "Common ground": lambda: view_common_ground(req),
    }
    views[view or "Table 1"]()


render()
