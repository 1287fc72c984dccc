"""The papers' figures as plotly figures: Figure 1 (intelligible sessions by message bound)
and Figure 2 (machine performance after each session), from pxp.analysis.tables' and
pxp.analysis.performance's frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from pxp.analysis.performance import PERFORMANCE, performance_median
from pxp.analysis.tables import figure1_frame
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, Table1


def plain(text: str) -> str:
    """A name safe for plotly, which reads <b>, <a href> ... in trace names as markup."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def figure1(frames: dict[str, Table1], metrics: Sequence[str] = ("one_way_human", "one_way_machine", "two_way"),
            *, proportion: bool = False) -> Any:
    """Figure 1: cumulative intelligible sessions against the message bound, min/max error bars.

    One panel per group (the paper's (a), (b), (c)), sharing the y axis; counts, or
    proportions of the group's (median) total sessions.
    """
    from plotly.subplots import make_subplots

    names = list(frames) or [""]
    cols = min(len(names), 3)
    rows = -(-len(names) // cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, subplot_titles=[plain(n) for n in names]
                        if len(names) > 1 else None, horizontal_spacing=0.04, vertical_spacing=0.12)
    colors = {"one_way_human": "#1f77b4", "one_way_machine": "#ff7f0e", "two_way": "#2ca02c",
              "strong_human": "#9467bd", "strong_machine": "#8c564b", "ultra_strong_human": "#e377c2",
              "ultra_strong_machine": "#7f7f7f"}
    for i, (name, t) in enumerate(frames.items()):
        df = figure1_frame(t, name)
        if proportion:
            scale = 1 / t.total_sessions if t.total_sessions else 0.0
            df[["median", "min", "max"]] = df[["median", "min", "max"]].astype(float) * scale
        band = int(df.j.max()) > BAND_ABOVE if len(df) else False
        for metric in metrics:
            d = df[df.metric == metric]
            label = METRIC_LABELS[metric].replace(" intelligible sessions", "")
            where = {"row": i // cols + 1, "col": i % cols + 1}
            if band:  # many bounds: a min–max band stays readable where error bars crowd
                fig.add_trace(go_scatter(
                    x=[*d.j, *d.j[::-1]], y=[*d["max"], *d["min"][::-1]], fill="toself", mode="lines",
                    line={"width": 0}, fillcolor=_rgba(colors[metric], 0.18), hoverinfo="skip",
                    showlegend=False, legendgroup=metric, name=plain(f"{label} min–max"),
                ), **where)
            fig.add_trace(go_scatter(
                x=d.j, y=d["median"], mode="lines" if band else "lines+markers", name=plain(label),
                legendgroup=metric, showlegend=i == 0, line={"color": colors[metric]},
                error_y=None if band else {"type": "data", "symmetric": False,
                                           "array": (d["max"] - d["median"]).tolist(),
                                           "arrayminus": (d["median"] - d["min"]).tolist()},
            ), **where)
    top = max((int(figure1_frame(t, n).j.max()) for n, t in frames.items() if len(figure1_frame(t, n))),
              default=1)
    fig.update_xaxes(title_text="message bound j", tickvals=bound_ticks(top), range=[0.5, top + 0.5])
    fig.update_yaxes(title_text="proportion of sessions" if proportion else "sessions (median over repetitions)",
                     col=1, rangemode="nonnegative")
    what = "min–max band" if top > BAND_ABOVE else "error bars min–max"
    fig.update_layout(title={"text": f"Figure 1: intelligible sessions by message bound j (median; {what})",
                             "x": 0, "font": {"size": 15}},
                      legend_title="", margin={"t": 80}, height=380 * rows + 40)
    return fig


BAND_ABOVE = 12  # bounds: above this many, Figure 1 shows a band instead of error bars


def bound_ticks(n: int, most: int = 20) -> list[int]:
    """Ticks at message bounds 1…n only, thinned to at most `most` (1 and n always shown)."""
    step = max(1, -(-n // most))
    ticks = list(range(1, n + 1, step))
    return ticks if ticks[-1] == n else [*ticks, n]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def go_scatter(**kw: Any) -> Any:
    import plotly.graph_objects as go

    return go.Scatter(**kw)


def figure2(df: pd.DataFrame, metrics: Sequence[str] = PERFORMANCE) -> Any:
    """Figure 2: machine performance against sessions processed, per repetition and median.

    One panel per experiment; thin step lines per repetition, thick lines the median.
    """
    from plotly.subplots import make_subplots

    exps = sorted(df.experiment.unique()) if not df.empty else [""]
    cols = min(len(exps), 3)
    rows = -(-len(exps) // cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.04, vertical_spacing=0.12,
                        subplot_titles=[plain(e) for e in exps] if len(exps) > 1 else None)
    med = performance_median(df)
    colors = {"prediction": "#1f77b4", "explanation": "#ff7f0e", "both": "#2ca02c"}
    faint = repetition_opacity(int(df.repetition.nunique()) if not df.empty else 1)
    for i, exp in enumerate(exps):
        where = {"row": i // cols + 1, "col": i % cols + 1}
        d = df[df.experiment == exp]
        for rep, dr in d.groupby("repetition"):
            for mname in metrics:
                fig.add_trace(go_scatter(
                    x=dr.after_session, y=dr[mname], mode="lines", opacity=faint, showlegend=False,
                    line_shape="hv", line={"color": colors[mname], "width": 1}, legendgroup=mname,
                    name=plain(f"{exp} r{rep} {mname}"),
                ), **where)
        dm = med[med.experiment == exp]
        for mname in metrics:
            fig.add_trace(go_scatter(
                x=dm.after_session, y=dm[mname], mode="lines+markers", line_shape="hv", legendgroup=mname,
                line={"color": colors[mname], "width": 3}, name=f"{mname} (median)", showlegend=i == 0,
            ), **where)
    fig.update_xaxes(title_text="sessions processed")
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02], col=1)
    fig.update_layout(title={"text": "Figure 2: machine performance after each session (thick: median; "
                                     "faint: each repetition)", "x": 0, "font": {"size": 15}},
                      margin={"t": 80}, height=380 * rows + 40)
    return fig


def repetition_opacity(reps: int) -> float:
    """Per-repetition lines fade as R grows, so the median stays visible (R = 100: 0.05)."""
    return max(0.05, min(0.35, 5 / max(reps, 1)))
