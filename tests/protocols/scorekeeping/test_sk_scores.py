"""Hand-computed episodes and their clembench scores.

Instance (sk_helpers): slots disclosed in turns to=0, from=1, by=2, class=3, when=4, so over the 6 probing
rounds the gold labels hold 5+4+3+2+1 = 15 ones and 15 zeros; round 2 has 2 ones (to, from).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from sk_helpers import ORDER, Scripted, instance

from pxp.protocols.scorekeeping import scores as S
from pxp.protocols.scorekeeping.episode import play_episode


def run(answerer: Scripted) -> tuple[dict[str, Any], dict[int, dict[str, Any]], dict[str, Any]]:
    rec = play_episode(instance(), answerer, model="m")
    logs = rec.to_interactions()
    sc = S.score_interactions(logs)
    return sc["episode scores"], sc["turn scores"], logs


def test_perfect() -> None:
    ep, turns, logs = run(Scripted())
    assert ep == {"Middle-Accuracy": 1.0, "Accuracy": 1.0, "Kappa": 1.0, "Truncated Kappa": 1.0,
                  "Slot-Filling-Accuracy": 1.0, "Main Score": 100.0, "Aborted": 0, "Lose": 0, "Success": 1,
                  "Request Count": 35, "Parsed Request Count": 35, "Violated Request Count": 0,
                  "Request Success Ratio": 1.0}
    assert list(turns) == [0, 1, 2, 3, 4, 5]
    assert turns[0] == {"Request Count": 5, "Parsed Request Count": 5, "Violated Request Count": 0, "Accuracy": 1.0}
    assert turns[3] == {"Request Count": 6, "Parsed Request Count": 6, "Violated Request Count": 0, "Accuracy": 1.0,
                        "Slot Filled?": 1}
    assert logs["Played Probe Rounds"] == 6 and logs["Aborted"] is False


def test_all_no() -> None:
    ep, turns, _ = run(Scripted(probe=lambda r, s: False))
    # pred all 0: accuracy 15/30; kappa = 1 - 15 / (30*15/30 + 0) = 0
    assert ep["Accuracy"] == 0.5
    assert ep["Kappa"] == 0.0 and ep["Truncated Kappa"] == 0.0
    assert ep["Middle-Accuracy"] == 0.6  # round 2: 3 of 5 slots still private
    assert ep["Main Score"] == 0.0
    assert (ep["Success"], ep["Lose"], ep["Aborted"]) == (0, 1, 0)
    assert [turns[r]["Accuracy"] for r in range(6)] == [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]


def test_all_yes() -> None:
    ep, turns, _ = run(Scripted(probe=lambda r, s: True))
    assert ep["Accuracy"] == 0.5
    assert ep["Kappa"] == 0.0
    assert ep["Middle-Accuracy"] == 0.4
    assert ep["Main Score"] == 0.0
    assert [turns[r]["Accuracy"] for r in range(6)] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_one_wrong_slot_value() -> None:
    # turn 2 asks "by" (train); the answer gives another value, which is still shared
    ep, turns, logs = run(Scripted(answers={2: "ANSWER: by plane."}))
    assert logs["Filled Slots"] == [True, True, False, True, True]
    assert turns[3]["Slot Filled?"] == 0 and turns[2]["Slot Filled?"] == 1
    assert ep["Slot-Filling-Accuracy"] == 0.8
    assert ep["Kappa"] == 1.0
    assert ep["Main Score"] == pytest.approx(100 * 2 * 0.8 / 1.8)
    assert (ep["Success"], ep["Lose"]) == (0, 1)


def test_anticipated_slot() -> None:
    # turn 0 asks "to"; the answer also gives "from" (Lisbon), which is shared from round 1 on
    answers = {0: "ANSWER: Reykjavik, leaving from Lisbon."}
    aware = Scripted(probe=lambda r, s: r > (0 if s == "from" else ORDER.index(s)), answers=answers)
    ep, _, logs = run(aware)
    assert logs["realised_slots"] == {"to": 0, "from": 0, "by": 2, "class": 3, "when": 4}
    assert [p["gt"] for p in logs["probes"][1] if p["target"] == "FROM"] == [1]
    assert ep["Accuracy"] == 1.0 and ep["Kappa"] == 1.0
    assert any(e["action"]["content"] == "Value for FROM anticipated; ground truth turn updated from 1 to 0."
               for e in logs["turns"][1])
    # an answerer that misses the anticipation errs once (round 1, FROM):
    # gold 16 ones / 14 zeros, pred 15/15; kappa = 1 - 1 / (15*16/30 + 15*14/30) = 14/15
    ep, turns, _ = run(Scripted(answers=answers))
    assert ep["Accuracy"] == 29 / 30
    assert ep["Kappa"] == 1 - 1 / 15
    assert turns[1]["Accuracy"] == 0.8
    assert ep["Main Score"] == pytest.approx(2800 / 29)


def test_aborted_after_five_invalid_probe_replies() -> None:
    calls = {"n": 0}

    def probe(r: int, s: str) -> bool | str:
        if r == 2 and s == "by":
            calls["n"] += 1
            return "ASIDE: perhaps"
        return r > ORDER.index(s)

    ep, turns, logs = run(Scripted(probe=probe))
    assert calls["n"] == 5
    assert logs["Aborted"] is True and logs["Played Probe Rounds"] == 2
    assert len(logs["probes"]) == 3
    failed = logs["probes"][2][2]
    assert failed["target"] == "BY" and failed["value"] == 2 and failed["tries"] == 6  # pinned: tries = 6
    assert "value" not in logs["probes"][2][3]  # probes after the failure are never posed
    assert logs["Request Count"] == [5, 6, 8, 0, 0, 0]
    assert logs["Violated Request Count"] == [0, 0, 5, 0, 0, 0]
    assert list(turns) == [0, 1]
    stored = S.nan_to_none(ep)
    for name in ("Accuracy", "Kappa", "Truncated Kappa", "Slot-Filling-Accuracy", "Main Score"):
        assert stored[name] is None
    assert "Middle-Accuracy" not in ep  # pinned: clembench logs it only when round 2 was played
    assert (ep["Aborted"], ep["Success"], ep["Lose"]) == (1, 0, 0)
    assert ep["Request Count"] == 19 and ep["Parsed Request Count"] == 14
    assert ep["Request Success Ratio"] == 14 / 19
    questions = [e["action"]["content"] for e in logs["turns"][2] if e["action"]["type"] == "probe question"]
    assert len(set(questions[2:7])) == 5 and "Please answer this question carefully." in questions[3]


def test_aborted_after_middle_round_keeps_nan_middle_accuracy() -> None:
    ep, _, logs = run(Scripted(probe=lambda r, s: "nope" if r == 4 else r > ORDER.index(s)))
    assert logs["Played Probe Rounds"] == 4
    assert math.isnan(ep["Middle-Accuracy"])
    assert S.nan_to_none(ep)["Middle-Accuracy"] is None


def test_invalid_answer_to_questioner_is_violated_and_aborts() -> None:
    ep, _, logs = run(Scripted(answers={1: "Lisbon."}))
    assert logs["Aborted"] is True
    assert logs["Violated Request Count"] == [0, 0, 1, 0, 0, 0]
    assert logs["Played Probe Rounds"] == 2 and logs["Filled Slots"] == [True]
    assert ep["Aborted"] == 1 and ep["Violated Request Count"] == 1
    assert any(e["action"]["content"] == "Abort: invalid format in slot filling." for e in logs["turns"][-1])


def test_kappa_matches_sklearn_values() -> None:
    # values from sklearn.metrics.cohen_kappa_score
    assert S.cohen_kappa([0, 1, 1], [0, 1, 0]) == 0.3999999999999999
    assert S.cohen_kappa([0, 0], [1, 1]) == 0.0
    assert S.cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == -1.0
    assert math.isnan(S.cohen_kappa([0, 0], [0, 0]))  # one label only: sklearn gives NaN


def test_nan_kappa_in_played_episode_truncates_to_zero() -> None:
    # pinned clembench behaviour: max(0, nan) == 0, so Main Score is 0, not NaN
    logs = {"realised_slots": {"a": 0}, "Aborted": False, "Played Probe Rounds": 1,
            "probes": [[{"gt": 0, "value": 0}]], "Filled Slots": [True],
            "Request Count": [1], "Parsed Request Count": [1], "Violated Request Count": [0]}
    ep = S.score_interactions(logs)["episode scores"]
    assert math.isnan(ep["Kappa"])
    assert ep["Truncated Kappa"] == 0 and ep["Main Score"] == 0
    assert S.nan_to_none(ep)["Kappa"] is None


def test_main_score() -> None:
    assert S.main_score(1.0, 1.0) == 100.0
    assert S.main_score(0.0, 0.0) == 0
    assert S.main_score(1.0, 0.5) == pytest.approx(66.6666666)
    assert math.isnan(S.main_score(float("nan"), 1.0))


def test_leaderboard() -> None:
    eps: list[tuple[str, dict[str, Any]]] = [
           ("a", {"Aborted": 0, "Main Score": 100.0}), ("a", {"Aborted": 0, "Main Score": 0.0}),
           ("a", {"Aborted": 1, "Main Score": float("nan")}), ("b", {"Aborted": 0, "Main Score": 40.0}),
           ("c", {"Aborted": 1, "Main Score": None})]
    board = S.leaderboard(eps)
    assert board["a"]["% Played"] == pytest.approx(200 / 3)
    assert board["a"]["Quality Score"] == 50.0
    assert board["a"]["Quality Score (std)"] == pytest.approx(math.sqrt(5000))  # ddof = 1
    assert board["b"] == {"% Played": 100.0, "Quality Score": 40.0, "Quality Score (std)": None}
    assert board["c"] == {"% Played": 0.0, "Quality Score": None, "Quality Score (std)": None}
