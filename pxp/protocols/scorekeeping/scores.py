"""Turn, episode and leaderboard scores of the scorekeeping game, named and computed as clembench does.

Follows clembench's privateshared/master.py `PrivateSharedScorer` (sklearn accuracy_score and
cohen_kappa_score, NaN for aborted episodes) and clemgame/metrics.py names; the leaderboard follows
clembench's eval (% Played = 100 × (1 − mean Aborted); Quality Score = mean Main Score over played
episodes, with the pandas standard deviation, ddof = 1). Pure standard library.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pxp.protocols.scorekeeping.episode import PARSED_REQUEST_COUNT, REQUEST_COUNT, VIOLATED_REQUEST_COUNT
from pxp.protocols.scorekeeping.rules import ScorekeepingError

NAN = float("nan")

ACCURACY = "Accuracy"
KAPPA = "Kappa"
TRUNCATED_KAPPA = "Truncated Kappa"
MIDDLE_ACCURACY = "Middle-Accuracy"
SLOT_FILLING_ACCURACY = "Slot-Filling-Accuracy"
MAIN_SCORE = "Main Score"
ABORTED = "Aborted"
SUCCESS = "Success"
LOSE = "Lose"
REQUEST_SUCCESS_RATIO = "Request Success Ratio"
SLOT_FILLED = "Slot Filled?"
PLAYED = "% Played"
QUALITY = "Quality Score"
QUALITY_STD = "Quality Score (std)"

EPISODE_SCORE_NAMES = (ACCURACY, KAPPA, TRUNCATED_KAPPA, MIDDLE_ACCURACY, SLOT_FILLING_ACCURACY, MAIN_SCORE,
                       ABORTED, LOSE, SUCCESS, REQUEST_COUNT, PARSED_REQUEST_COUNT, VIOLATED_REQUEST_COUNT,
                       REQUEST_SUCCESS_RATIO)

Scores = dict[str, Any]


def accuracy(gold: Sequence[int], pred: Sequence[int]) -> float:
    """sklearn accuracy_score: the share of equal labels (NaN for no labels)."""
    if not gold:
        return NAN
    if len(gold) != len(pred):
        raise ScorekeepingError("gold and predictions differ in length")
    equal: int = sum(map(operator.eq, gold, pred))
    return equal / len(gold)


def cohen_kappa(gold: Sequence[int], pred: Sequence[int]) -> float:
    """Cohen's κ exactly as sklearn's cohen_kappa_score (unweighted) computes it.

    sklearn: confusion matrix over the sorted union of labels; expected = outer(column sums, row sums) / n;
    κ = 1 − Σ off-diagonal(confusion) / Σ off-diagonal(expected), summed in the same order, so the float
    result is identical. With one label only (e.g. all gold and all predictions 0) the ratio is 0/0:
    sklearn returns NaN (pinned: `replace_undefined_by=np.nan`, its default).
    """
    labels = sorted(set(gold) | set(pred))
    k = len(labels)
    index = {lab: i for i, lab in enumerate(labels)}
    cm = [[0] * k for _ in range(k)]
    for g, p in zip(gold, pred, strict=True):
        cm[index[g]][index[p]] += 1
    n = len(gold)
    sum0 = [sum(cm[i][j] for i in range(k)) for j in range(k)]  # column sums (predictions)
    sum1 = [sum(cm[i][j] for j in range(k)) for i in range(k)]  # row sums (gold)
    if n == 0:
        return NAN
    num = 0
    den = 0.0
    for i in range(k):
        for j in range(k):
            if i != j:
                num += cm[i][j]
                den += sum0[i] * sum1[j] / n
    if den == 0:
        return NAN
    return 1 - num / den


def is_nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def main_score(sf_acc: float, trunc_kappa: float) -> float:
    """clembench `compute_bench_score`: 100 × harmonic mean; NaN if either is NaN; 0 if both are 0."""
    if is_nan(sf_acc) or is_nan(trunc_kappa):
        return NAN
    if sf_acc + trunc_kappa == 0:
        return 0
    return 100 * (2 * sf_acc * trunc_kappa / (sf_acc + trunc_kappa))


def score_interactions(logs: Mapping[str, Any], n_slots: int | None = None) -> dict[str, Any]:
    """clembench's scores.json dict {"turn scores": {round: {...}}, "episode scores": {...}} (NaN kept).

    `n_slots` defaults to the number of realised slots (clembench uses the instance's slots).
    Pinned details: turn scores exist only for played probe rounds; Middle-Accuracy is logged only when
    round ⌊(n+1)/2⌋ − 1 was played (so it is absent for an episode aborted before it, NaN when aborted
    after it); with κ NaN in a played episode, Truncated Kappa = max(0, NaN) = 0 as in Python.
    """
    n = len(logs["realised_slots"]) if n_slots is None else n_slots
    aborted = bool(logs["Aborted"])
    probes = logs["probes"]
    reqs_l, parsed_l, violated_l = logs[REQUEST_COUNT], logs[PARSED_REQUEST_COUNT], logs[VIOLATED_REQUEST_COUNT]
    filled = logs["Filled Slots"]
    turn_scores: dict[int, dict[str, Any]] = {}
    episode: dict[str, Any] = {}
    gold: list[int] = []
    pred: list[int] = []
    middle = int((n + 1) / 2) - 1
    for turn in range(logs["Played Probe Rounds"]):
        tg = [p["gt"] for p in probes[turn]]
        tp = [p["value"] for p in probes[turn]]
        ts = {REQUEST_COUNT: reqs_l[turn], PARSED_REQUEST_COUNT: parsed_l[turn],
              VIOLATED_REQUEST_COUNT: violated_l[turn], ACCURACY: accuracy(tg, tp)}
        if turn != 0:
            ts[SLOT_FILLED] = int(filled[turn - 1])
        turn_scores[turn] = ts
        gold += tg
        pred += tp
        if turn == middle:
            episode[MIDDLE_ACCURACY] = NAN if aborted else ts[ACCURACY]
    acc = NAN if aborted else accuracy(gold, pred)
    kappa = NAN if aborted else cohen_kappa(gold, pred)
    trunc = NAN if aborted else max(0, kappa)  # max(0, nan) is 0: pinned Python/clembench behaviour
    sf_acc = NAN if aborted else (sum(filled) / len(filled) if filled else NAN)
    episode.update({ACCURACY: acc, KAPPA: kappa, TRUNCATED_KAPPA: trunc, SLOT_FILLING_ACCURACY: sf_acc,
                    MAIN_SCORE: main_score(sf_acc, trunc)})
    success = 0 if aborted else int(acc == 1.0 and sf_acc == 1.0)
    lose = 0 if aborted else int(not success)
    reqs, parsed, violated = sum(reqs_l), sum(parsed_l), sum(violated_l)
    episode.update({ABORTED: int(aborted), LOSE: lose, SUCCESS: success, REQUEST_COUNT: reqs,
                    PARSED_REQUEST_COUNT: parsed, VIOLATED_REQUEST_COUNT: violated,
                    REQUEST_SUCCESS_RATIO: parsed / reqs if reqs else NAN})
    return {"turn scores": turn_scores, "episode scores": episode}


def nan_to_none(value: Any) -> Any:
    """NaN → None, recursively through dicts and lists (how pxp stores and reports scores)."""
    if is_nan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_to_none(v) for v in value]
    return value


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return NAN  # pandas Series.std with ddof=1 of one value is NaN
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def leaderboard(episodes: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Per model: % Played, Quality Score and its std from (model, episode scores) pairs; NaN → None.

    A Main Score of None/NaN (aborted) is left out of the Quality Score, as pandas' mean skips NaN.
    """
    aborted: dict[str, list[int]] = {}
    mains: dict[str, list[float]] = {}
    for model, ep in episodes:
        aborted.setdefault(model, []).append(int(ep[ABORTED]))
        score = ep.get(MAIN_SCORE)
        if not int(ep[ABORTED]) and score is not None and not is_nan(score):
            mains.setdefault(model, []).append(float(score))
    out: dict[str, dict[str, float | None]] = {}
    for model, ab in aborted.items():
        ms = mains.get(model, [])
        quality = sum(ms) / len(ms) if ms else NAN
        out[model] = nan_to_none({PLAYED: 100 * (1 - sum(ab) / len(ab)), QUALITY: quality, QUALITY_STD: _std(ms)})
    return out
