"""The Analytics page's Compare view (docs/research.md, Grids and comparisons): two experiments, or a study's machine
pairs,
compared session by session on the same instances.

The numbers are pxp.analysis.statistics (paired differences, bootstrap 95 % CIs, McNemar's
test), the code path of `pxp report --compare` and `pxp report --study`. Names are shown as text; the command lines
too (st.text: st.code's highlighter is the largest script a browser loads for the page).
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd
import streamlit as st

from pxp.analysis.report import ReportError
from pxp.analysis.statistics import ComparisonError, comparison_csv, difference_line
from pxp.analysis.study import study_json, study_names
from pxp.analysis.tables import SHORT_LABELS
from pxp.app import resources, ui
from pxp.app.analytics_data import Request, compare_pair, compare_view
from pxp.app.download import download


def sig3(x: float) -> str:
    """Three significant digits, trailing zeros kept (0.933, 0.900, -0.0667): the CSV download holds every digit."""
    return f"{x:#.3g}"


def comparison_frame(cmp: dict[str, Any]) -> pd.DataFrame:
    """One row per property: both proportions, the difference with its 95 % CI, discordant pairs, p; short
    headers and labels, so that the table fits beside the sidebar at 1280 px."""
    return pd.DataFrame([{
        "Property": SHORT_LABELS[m["metric"]], "A": sig3(m["a"]), "B": sig3(m["b"]), "A − B": sig3(m["difference"]),
        "95% CI": f"{sig3(m['ci_low'])} to {sig3(m['ci_high'])}", "A only": m["a_only"], "B only": m["b_only"],
        "McNemar p": sig3(m["p_value"]),
    } for m in cmp["metrics"]])


def show_comparison(cmp: dict[str, Any], key: str) -> None:
    st.caption(ui.escape_md(f"A = {cmp['a']}, B = {cmp['b']}. {difference_line(cmp)}"))
    ui.small_table(comparison_frame(cmp), numeric=("A", "B", "A − B", "McNemar p"))
    download("Comparison (CSV)", comparison_csv(cmp), file_name="comparison.csv", mime="text/csv",
             key=f"{key}_csv")


def _two_experiments(req: Request) -> None:
    names = [str(e["name"]) for e in req.opts.experiments]
    pair = compare_pair(req)
    if pair is None:
        st.info("Two experiments on the same instances are needed to compare.")
        return
    c = st.columns(2)
    a = c[0].selectbox("Experiment A", names, index=names.index(pair[0]), key="analytics_compare_a")
    b = c[1].selectbox("Experiment B", names, index=names.index(pair[1]), key="analytics_compare_b")
    if a is None or b is None or a == b:
        st.info("Choose two different experiments.")
        return
    try:
        cmp = compare_view(resources.engine(), a, b)
    except ComparisonError as e:
        st.warning(ui.escape_md(str(e)))
        return
    show_comparison(cmp, "analytics_compare_table")
    st.caption("Reproduce this comparison")
    st.text(f"pxp report --experiment {shlex.quote(a)} --experiment {shlex.quote(b)} --compare")


def _study() -> None:
    studies = study_names(resources.engine())
    if not studies:
        st.info("No studies yet: `pxp run --grid grid.toml` creates one.")
        return
    name = st.selectbox("Study", studies, key="analytics_compare_study")
    if name is None:
        return
    try:
        rep = study_json(resources.engine(), name)
    except ReportError as e:
        st.warning(ui.escape_md(str(e)))
        return
    st.caption(ui.escape_md(f"{len(rep['experiments'])} experiments: " +
                            ", ".join(r["experiment"] for r in rep["experiments"])))
    if not rep["comparisons"]:
        st.info("No two experiments of this study differ only in the machine.")
    for i, cmp in enumerate(rep["comparisons"]):
        same = ", ".join(f"{k} {v}" for k, v in cmp["same"].items() if v is not None)
        st.subheader(ui.escape_md(f"{cmp['machines'][0]} vs {cmp['machines'][1]}"))
        st.caption(ui.escape_md(same))
        if "error" in cmp:
            st.warning(ui.escape_md(cmp["error"]))
        else:
            show_comparison(cmp, f"analytics_compare_study_{i}")
    st.caption("Reproduce this comparison")
    st.text(f"pxp report --study {shlex.quote(name)}")


def view_compare(req: Request) -> None:
    """Two experiments (the first two chosen above by default) or a study's machine pairs."""
    what = st.radio("Compare", ("Two experiments", "A study"), horizontal=True, key="analytics_compare_what")
    if what == "A study":
        _study()
    else:
        _two_experiments(req)
    st.caption("Sessions are paired by repetition and instance. A − B with a bootstrap 95 % interval (instances "
               "resampled, 10,000 times, seed 0); McNemar's exact test on the discordant pairs (A only, B only).")
