"""The app's charts as Vega-Lite specs (https://vega.github.io/vega-lite/docs/): the papers' Figure 1 (intelligible
sessions by message bound) and Figure 2 (machine performance after each session), and the Analytics and
Scorekeeping views' other charts (docs/research.md, Analytics).

Each spec is a plain dict whose data is a pandas frame under `data.values` (Streamlit ships it as Arrow). Field names
are ours; names people chose (experiments, labels, models) are data values only, never field names (Vega-Lite reads
dots and brackets in a field as a path) nor inside an expression: Vega draws them as SVG text, literally. Every
spec has a `description`, the chart's accessible name (docs/accessibility.md, "Text alternatives").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pxp.analysis.performance import PERFORMANCE, performance_median
from pxp.analysis.tables import figure1_frame
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, Table1
from pxp.protocols.scorekeeping.scores import PLAYED, QUALITY, QUALITY_STD

Spec = dict[str, Any]

BAND_ABOVE = 12  # bounds: above this many, Figure 1 shows a band instead of error bars
PANEL_HEIGHT = 300  # px: each panel's plot of a figure drawn per group
ALONE_HEIGHT = 420  # px: a figure of one panel, its title and legend included (Streamlit fits it)
PANEL_WIDTH = {2: 410, 3: 270}  # px: a panel's width, two or three a row in the app's wide layout
FIG1_COLORS = {"one_way_human": "#1f77b4", "one_way_machine": "#ff7f0e", "two_way": "#2ca02c",
               "strong_human": "#9467bd", "strong_machine": "#8c564b", "ultra_strong_human": "#e377c2",
               "ultra_strong_machine": "#7f7f7f"}
FIG2_COLORS = {"prediction": "#1f77b4", "explanation": "#ff7f0e", "both": "#2ca02c"}


def curve_label(metric: str) -> str:
    """Figure 1's legend entry of a metric: "2-way", "1-way for Human" ..."""
    return METRIC_LABELS[metric].replace(" intelligible sessions", "")


def title(text: str) -> Spec:
    return {"text": text, "anchor": "start", "fontSize": 15}


def panels(body: Spec, count: int, data: pd.DataFrame, *, description: str, heading: str) -> Spec:
    """`body` (encodings and layers) over `data`: one panel, or one per value of its `panel` field in the order of
    its `order` field, up to three a row, sharing both axes."""
    if count <= 1:
        chart: Spec = {**body, "height": ALONE_HEIGHT}
    else:
        cols = min(count, 3)
        chart = {
            "facet": {"field": "panel", "type": "nominal", "title": None, "sort": {"field": "order", "op": "min"},
                      "header": {"labelFontSize": 13, "labelLimit": PANEL_WIDTH[cols], "labelAnchor": "start"}},
            "columns": cols,
            "spec": {**body, "width": PANEL_WIDTH[cols], "height": PANEL_HEIGHT},
            "resolve": {"scale": {"x": "shared", "y": "shared"}},
        }
    return {"description": description, "title": title(heading), "data": {"values": data}, **chart}


def figure1(frames: Mapping[str, Table1], metrics: Sequence[str] = ("one_way_human", "one_way_machine", "two_way"),
            *, proportion: bool = False) -> Spec:
    """Figure 1: cumulative intelligible sessions against the message bound j, the median over repetitions with
    min–max error bars (a min–max band above BAND_ABOVE bounds).

    One panel per group (the paper's (a), (b), (c)), sharing the y axis; counts, or proportions of the group's
    (median) total sessions. Data: panel, order, curve, j, median, min, max.
    """
    parts = []
    for i, (name, t) in enumerate(frames.items()):
        df = figure1_frame(t, name)
        if proportion:
            scale = 1 / t.total_sessions if t.total_sessions else 0.0
            df[["median", "min", "max"]] = df[["median", "min", "max"]].astype(float) * scale
        d = df[df.metric.isin(metrics)]
        parts.append(pd.DataFrame({"panel": str(name), "order": i, "curve": d.metric.map(curve_label),
                                   "j": d.j, "median": d["median"], "min": d["min"], "max": d["max"]}))
    data = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["panel", "order", "curve", "j", "median", "min", "max"])
    top = int(data.j.max()) if len(data) else 1
    band = top > BAND_ABOVE  # many bounds: a min–max band stays readable where error bars crowd
    what = "min–max band" if band else "error bars min–max"
    y_title = "proportion of sessions" if proportion else "sessions (median over repetitions)"

    def y(field: str) -> Spec:
        return {"field": field, "type": "quantitative", "title": y_title, "scale": {"zero": True}}

    spread: Spec = ({"mark": {"type": "area", "opacity": 0.18}, "encoding": {"y": y("min"), "y2": {"field": "max"}}}
                    if band else
                    {"mark": {"type": "errorbar", "ticks": True}, "encoding": {"y": y("min"), "y2": {"field": "max"}}})
    body = {
        "encoding": {
            "x": {"field": "j", "type": "quantitative", "title": "message bound j",
                  "scale": {"domain": [0.5, top + 0.5], "nice": False, "zero": False},
                  "axis": {"values": bound_ticks(top), "format": "d"}},
            "color": {"field": "curve", "type": "nominal", "title": "sessions",
                      "scale": {"domain": [curve_label(m) for m in metrics],
                                "range": [FIG1_COLORS[m] for m in metrics]},
                      "legend": {"title": None, "orient": "top", "labelLimit": 300, "symbolOpacity": 1}},
        },
        "layer": [spread, {
            "mark": {"type": "line", "point": not band},
            "encoding": {"y": y("median"), "tooltip": [
                {"field": "panel", "title": "group"}, {"field": "curve", "title": "sessions"},
                {"field": "j", "title": "bound j"}, {"field": "median", "format": ".3~f"},
                {"field": "min", "format": ".3~f"}, {"field": "max", "format": ".3~f"}]},
        }],
    }
    return panels(body, len(frames), data, heading=f"Figure 1: intelligible sessions by message bound j (median; "
                                                   f"{what})",
                  description=f"Figure 1: intelligible sessions against the message bound j, one panel per group: "
                              f"the median over repetitions, {what}. Its numbers are in the table below.")


def bound_ticks(n: int, most: int = 20) -> list[int]:
    """Ticks at message bounds 1…n only, thinned to at most `most` (1 and n always shown)."""
    step = max(1, -(-n // most))
    ticks = list(range(1, n + 1, step))
    return ticks if ticks[-1] == n else [*ticks, n]


def figure2(df: pd.DataFrame, metrics: Sequence[str] = PERFORMANCE) -> Spec:
    """Figure 2: machine performance against sessions processed, per repetition and median.

    One panel per experiment; faint step lines per repetition, thick step lines with points the median
    (pxp.analysis.performance.performance_median). Data: panel, order, kind (repetition, median), repetition,
    after_session, curve, accuracy.
    """
    exps = sorted(df.experiment.unique()) if not df.empty else []
    order = {e: i for i, e in enumerate(exps)}
    cols = ["panel", "order", "kind", "repetition", "after_session", "curve", "accuracy"]
    runs = df.melt(id_vars=["experiment", "repetition", "after_session"], value_vars=list(metrics),
                   var_name="curve", value_name="accuracy").assign(kind="repetition")
    med = performance_median(df)
    meds = med.melt(id_vars=["experiment", "after_session"], value_vars=list(metrics), var_name="curve",
                    value_name="accuracy").assign(kind="median", repetition=None)
    data = pd.concat([runs, meds], ignore_index=True).rename(columns={"experiment": "panel"})
    data = data.assign(panel=data.panel.astype(str), order=data.panel.map(order))[cols] if len(data) else \
        pd.DataFrame(columns=cols)
    faint = repetition_opacity(int(df.repetition.nunique()) if not df.empty else 1)
    y = {"field": "accuracy", "type": "quantitative", "title": "accuracy", "scale": {"domain": [0, 1.02]}}
    body = {
        "encoding": {
            "x": {"field": "after_session", "type": "quantitative", "title": "sessions processed",
                  "axis": {"format": "d", "tickMinStep": 1}},
            "y": y,
            "color": {"field": "curve", "type": "nominal", "title": "accuracy of",
                      "scale": {"domain": list(metrics), "range": [FIG2_COLORS[m] for m in metrics]},
                      "legend": {"title": None, "orient": "top", "symbolOpacity": 1}},
        },
        "layer": [
            {"transform": [{"filter": {"field": "kind", "equal": "repetition"}}],
             "mark": {"type": "line", "interpolate": "step-after", "opacity": faint, "strokeWidth": 1},
             "encoding": {"detail": {"field": "repetition", "type": "nominal"}}},
            {"transform": [{"filter": {"field": "kind", "equal": "median"}}],
             "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 3, "point": True},
             "encoding": {"tooltip": [{"field": "panel", "title": "experiment"}, {"field": "curve"},
                                      {"field": "after_session", "title": "sessions processed"},
                                      {"field": "accuracy", "title": "median accuracy", "format": ".3f"}]}},
        ],
    }
    return panels(body, len(exps), data,
                  heading="Figure 2: machine performance after each session (thick: median; faint: each repetition)",
                  description="Figure 2: prediction, explanation and both-correct accuracy against sessions "
                              "processed, one panel per experiment: thick lines the median over repetitions, "
                              "faint lines each repetition. The medians are in the table below.")


def repetition_opacity(reps: int) -> float:
    """Per-repetition lines fade as R grows, so the median stays visible (R = 100: 0.05)."""
    return max(0.05, min(0.35, 5 / max(reps, 1)))


# --- the other views' charts (docs/research.md, Analytics; Scorekeeping game) -----------------------------------


def transitions(mat: pd.DataFrame) -> Spec:
    """The tag-transition matrix (pxp.analysis.tables.transition_matrix) as a heatmap with its counts written in."""
    rows, cols = [str(i) for i in mat.index], [str(c) for c in mat.columns]
    data = pd.DataFrame([{"from": r, "to": c, "messages": int(v)} for r, row in zip(rows, mat.to_numpy(), strict=True)
                         for c, v in zip(cols, row, strict=True)], columns=["from", "to", "messages"])
    half = int(data.messages.max()) / 2 if len(data) else 0
    return {
        "description": "Tag transitions: messages per tag of message j−1 (rows) and the tag that answered it "
                       "(columns). The same numbers are in the table above.",
        "data": {"values": data}, "height": {"step": 40},
        "encoding": {"x": {"field": "to", "type": "nominal", "sort": cols, "title": "answered with",
                           "axis": {"orient": "top", "labelAngle": 0}},
                     "y": {"field": "from", "type": "nominal", "sort": rows, "title": "message j−1"}},
        "layer": [
            {"mark": "rect", "encoding": {"color": {
                "field": "messages", "type": "quantitative", "title": "messages", "scale": {"scheme": "blues"},
                "legend": {"gradientLength": max(60, 40 * len(rows) - 30)}}}},
            {"mark": {"type": "text", "fontSize": 13},
             "encoding": {"text": {"field": "messages", "type": "quantitative"},
                          "color": {"condition": {"test": {"field": "messages", "gt": half}, "value": "white"},
                                    "value": "black"}}},
        ],
    }


def lengths(df: pd.DataFrame) -> Spec:
    """Sessions by length (messages), stacked by how they ended (pxp.analysis.tables.session_lengths)."""
    ended = df.stop_reason.where(df.status != "aborted", "aborted").replace("", "(none)").astype(str)
    data = pd.DataFrame({"lo": df.messages - 0.5, "hi": df.messages + 0.5, "messages": df.messages,
                         "ended": ended, "sessions": df.sessions})
    return {
        "description": "Session lengths: sessions per number of messages, stacked by how they ended. The same "
                       "numbers are in the table below.",
        "data": {"values": data}, "mark": {"type": "bar", "stroke": "white", "strokeWidth": 0.5},
        "encoding": {
            "x": {"field": "lo", "type": "quantitative", "bin": "binned", "title": "messages",
                  "axis": {"format": "d", "tickMinStep": 1}},
            "x2": {"field": "hi"},
            "y": {"field": "sessions", "type": "quantitative", "title": "sessions", "stack": "zero"},
            "color": {"field": "ended", "type": "nominal", "title": "ended", "legend": {"orient": "top"}},
            "tooltip": [{"field": "messages"}, {"field": "ended"}, {"field": "sessions"}],
        },
    }


def latency(df: pd.DataFrame) -> Spec:
    """A histogram of the LLM latency per session in seconds, its bins from 0 (pxp.analysis.costs.llm_costs)."""
    data = pd.DataFrame({"latency_s": df.latency_ms.clip(lower=0) / 1000})
    top = float(data.latency_s.max()) if len(data) else 0.0
    return {
        "description": "A histogram of the LLM latency per session in seconds. Each session's latency is in the "
                       "table below.",
        "data": {"values": data}, "mark": "bar",
        "encoding": {
            "x": {"field": "latency_s", "type": "quantitative", "title": "LLM latency per session (s)",
                  "bin": {"maxbins": 40, "extent": [0, top or 1.0]}, "scale": {"domainMin": 0}},
            "y": {"aggregate": "count", "type": "quantitative", "title": "sessions"},
        },
    }


def probe_strip(df: pd.DataFrame) -> Spec:
    """Each probed session a point: its probe accuracy against whether it is one-way intelligible for the human,
    spread sideways (pxp.analysis.common_ground.probe_frame)."""
    n = len(df)
    data = pd.DataFrame({
        "one_way": df.one_way_human.map({True: "yes", False: "no"}), "accuracy": df.accuracy,
        "repetition": df.repetition, "ordinal": df.ordinal, "kappa": df.kappa,
        "spread": [((i * 0.618034) % 1) - 0.5 for i in range(n)],  # a fixed, even spread: the same every run
    })
    return {
        "description": "Probe accuracy of each probed session, for sessions one-way intelligible for the human "
                       "and not. Each session is a row of the table below.",
        "data": {"values": data}, "mark": {"type": "point", "filled": True, "size": 50, "opacity": 0.7},
        "encoding": {
            "x": {"field": "one_way", "type": "nominal", "sort": ["yes", "no"],
                  "title": "1-way intelligible for the human", "axis": {"labelAngle": 0}},
            "xOffset": {"field": "spread", "type": "quantitative", "scale": {"domain": [-1, 1]}},
            "y": {"field": "accuracy", "type": "quantitative", "title": "probe accuracy",
                  "scale": {"domain": [0, 1.02], "nice": False}},
            "color": {"field": "one_way", "type": "nominal", "scale": {"domain": ["yes", "no"]}, "legend": None},
            "tooltip": [{"field": "accuracy", "title": "probe accuracy"}, {"field": "repetition"},
                        {"field": "ordinal"}, {"field": "kappa", "title": "κ"}],
        },
    }


SCORES = (QUALITY, PLAYED)  # the leaderboard's two series


def leaderboard(df: pd.DataFrame) -> Spec:
    """Per model, the Quality Score as a bar with ± one standard deviation and % Played as a point; `df` has the
    columns model, QUALITY, QUALITY_STD and PLAYED (pxp.protocols.scorekeeping.scores), in the order drawn."""
    quality, std = df[QUALITY].astype(float), df[QUALITY_STD].astype(float).fillna(0)
    data = pd.DataFrame({"model": df.model.astype(str), "quality": quality, "played": df[PLAYED].astype(float),
                         "lo": (quality - std).clip(lower=0), "hi": quality + std})
    x = {"field": "model", "type": "nominal", "sort": None, "title": "model", "axis": {"labelAngle": 0,
                                                                                     "labelLimit": 200}}
    color = {"scale": {"domain": list(SCORES), "range": ["#1f77b4", "#ff7f0e"]}, "title": None,
             "legend": {"orient": "top"}}
    y = {"type": "quantitative", "title": "score (0–100)", "scale": {"domain": [0, 105]}}
    return {
        "description": "Leaderboard: each model's Quality Score (bar, ± one standard deviation) and % Played (point). "
                       "The same numbers are in the table above.",
        "data": {"values": data}, "height": 340,
        "encoding": {"x": x},
        "layer": [
            {"mark": {"type": "bar", "width": {"band": 0.6}},
             "encoding": {"y": {**y, "field": "quality"}, "color": {**color, "datum": SCORES[0]},
                          "tooltip": [{"field": "model"}, {"field": "quality", "title": SCORES[0], "format": ".2f"}]}},
            {"mark": {"type": "errorbar", "ticks": {"size": 24}, "color": "black"},
             "encoding": {"y": {**y, "field": "lo"}, "y2": {"field": "hi"}}},
            {"mark": {"type": "point", "filled": True, "size": 140},
             "encoding": {"y": {**y, "field": "played"}, "color": {**color, "datum": SCORES[1]},
                          "tooltip": [{"field": "model"}, {"field": "played", "title": SCORES[1], "format": ".1f"}]}},
        ],
    }


def probe_curve(curves: Mapping[str, Mapping[int, tuple[float, int]]]) -> Spec:
    """Per model, probe accuracy in each probing round (pxp.analysis.scorekeeping.probe_accuracy_by_round)."""
    data = pd.DataFrame([{"model": str(m), "round": r, "accuracy": a, "episodes": n} for m, by in curves.items()
                         for r, (a, n) in by.items()], columns=["model", "round", "accuracy", "episodes"])
    return {
        "description": "Probe accuracy per probing round, one line per model. The same numbers are in the table "
                       "below.",
        "data": {"values": data}, "height": 320, "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {"field": "round", "type": "quantitative", "title": "probing round (0 = before the first question)",
                  "axis": {"format": "d", "tickMinStep": 1}},
            "y": {"field": "accuracy", "type": "quantitative", "title": "probe accuracy",
                  "scale": {"domain": [0, 1.05]}},
            "color": {"field": "model", "type": "nominal", "title": "model", "sort": None,
                      "legend": {"orient": "top", "labelLimit": 300}},
            "tooltip": [{"field": "model"}, {"field": "round"},
                        {"field": "accuracy", "title": "probe accuracy", "format": ".3f"}, {"field": "episodes"}],
        },
    }
