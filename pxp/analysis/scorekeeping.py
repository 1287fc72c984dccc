"""The scorekeeping report (docs/research.md, Scorekeeping game): every episode's clembench scores and the per-model
leaderboard.

JSON: {"episodes": {"<model>/<experiment>/episode_<k>": {score: value}}, "models": {"<model>": {"% Played",
"Quality Score", "Quality Score (std)"}}} (NaN as null), as clembench's eval computes them
(pxp.protocols.scorekeeping.scores.leaderboard). Also the probe accuracy per probing round (the private →
shared curve of the paper's Figure) for the app.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from pxp.analysis.queries import AnalysisError
from pxp.protocols.scorekeeping.scores import ACCURACY, EPISODE_SCORE_NAMES, PLAYED, QUALITY, QUALITY_STD, leaderboard
from pxp.running.scorekeeping.games import StoredScores, stored_scores

FORMATS = ("table", "json", "csv")


def report(engine: Engine, names: Sequence[str]) -> dict[str, Any]:
    """The report of one or more stored games (models side by side; a later game's key wins)."""
    rows = stored_scores(engine, names)
    return build(rows)


def build(rows: Sequence[StoredScores]) -> dict[str, Any]:
    episodes = {r.key: r.scores for r in rows}
    models = leaderboard((r.model, r.scores) for r in rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.model] = counts.get(r.model, 0) + 1
    return {"episodes": episodes, "models": models, "counts": counts}


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def render(rep: dict[str, Any], fmt: str) -> str:
    """table: the leaderboard; json: the issue's shape; csv: one row per episode with every score."""
    if fmt == "json":
        return json.dumps({"episodes": rep["episodes"], "models": rep["models"]}, indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["episode", *EPISODE_SCORE_NAMES])
        for key, scores in rep["episodes"].items():
            w.writerow([key, *("" if scores.get(n) is None else scores[n] for n in EPISODE_SCORE_NAMES)])
        return buf.getvalue().rstrip("\n")
    if fmt != "table":
        raise AnalysisError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    header = ["model", "episodes", PLAYED, QUALITY, QUALITY_STD]
    body = [[m, str(rep["counts"].get(m, 0)), _fmt(v[PLAYED], 1), _fmt(v[QUALITY]), _fmt(v[QUALITY_STD])]
            for m, v in sorted(rep["models"].items(), key=lambda kv: -(kv[1][QUALITY] or -1.0))]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r))
             for r in [header, *body]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def probe_accuracy_by_round(rows: Sequence[StoredScores]) -> dict[str, dict[int, tuple[float, int]]]:
    """Per model and probing round: mean probe accuracy over the played rounds, and how many (needs turn
    scores: stored_scores(..., turns=True))."""
    sums: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        for rnd, ts in r.turn_scores.items():
            acc = ts.get(ACCURACY)
            if acc is not None:
                sums.setdefault(r.model, {}).setdefault(int(rnd), []).append(float(acc))
    return {m: {rnd: (sum(v) / len(v), len(v)) for rnd, v in sorted(by.items())} for m, by in sums.items()}
