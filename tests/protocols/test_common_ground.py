"""The common-ground probe's ground truth and scores on hand-made sessions (docs/research.md, Common-ground probe)."""

from __future__ import annotations

import pytest

from pxp.protocols.pxp.common_ground import (
    ProbeResult,
    human_turns,
    question_text,
    score,
    truth,
    truths,
)
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, Tag

M, H = Sender.MACHINE, Sender.HUMAN


def test_ratified_at_once() -> None:
    s = [Msg(1, M, Tag.INIT, "Edema", "fluid"), Msg(2, H, Tag.RATIFY, "Edema", "fluid", True, True, False)]
    assert truths(s, 2) == {"accept_prediction": True, "accept_explanation": True, "proposed_other": False}
    assert human_turns(s) == [2]


def test_refute_prediction_then_revise_to_the_machines_answer() -> None:
    s = [
        Msg(1, M, Tag.INIT, "Edema", "fluid in the lungs"),
        # the human keeps their own answer: prediction disputed, explanation accepted
        Msg(2, H, Tag.REFUTE, "Pneumonia", "fluid in the lungs", False, True, False),
        Msg(3, M, Tag.REFUTE, "Edema", "fluid in the lungs", False, True, False),
        # the human revises to the machine's prediction: MATCH against their previous answer is false,
        # yet the prediction they now send is the machine's
        Msg(4, H, Tag.REVISE, "edema ", "fluid in the lungs", False, True, True),
        Msg(5, M, Tag.RATIFY, "Edema", "fluid in the lungs", True, True, False),
        Msg(6, H, Tag.RATIFY, "edema", "fluid in the lungs", True, True, False),
    ]
    assert truths(s, 2) == {"accept_prediction": False, "accept_explanation": True, "proposed_other": True}
    assert truths(s, 4) == {"accept_prediction": False, "accept_explanation": True, "proposed_other": False}
    assert truths(s, 6) == {"accept_prediction": True, "accept_explanation": True, "proposed_other": False}
    assert human_turns(s) == [2, 4, 6]
    assert truths(s, 3) == {} and truths(s, 1) == {}  # machine messages are not probed
    # the task's MATCH decides a changed prediction
    assert truth("proposed_other", s, 4, lambda a, b: a == b) is True


def test_reject_and_missing_facts_fall_back_to_the_tag() -> None:
    s = [
        Msg(1, M, Tag.INIT, "A", "x"), Msg(2, H, Tag.REFUTE, "B", "y"), Msg(3, M, Tag.REFUTE, "A", "x"),
        Msg(4, H, Tag.REJECT, "B", "y"),
    ]
    assert truths(s, 4) == {"accept_prediction": False, "accept_explanation": False, "proposed_other": True}
    # REFUTE with no stored facts: acceptance is undecided and not asked
    assert truths(s, 2) == {"proposed_other": True}
    assert truth("accept_prediction", s, 2) is None
    with pytest.raises(ProtocolError, match="unknown common-ground question 'nonsense'"):
        truth("nonsense", s, 2)


def test_question_text_names_the_expert() -> None:
    assert question_text("accept_prediction", "the radiologist") == \
        "Does the radiologist accept your current prediction?"


def _r(t: bool, a: bool | None) -> ProbeResult:
    return ProbeResult(2, "accept_prediction", t, a, a is not None)


def test_scores_perfect_all_yes_all_no_and_invalid() -> None:
    truth_seq = [True, False, True, False]
    perfect = score(_r(t, t) for t in truth_seq)
    assert (perfect.accuracy, perfect.kappa, perfect.correct) == (1.0, 1.0, 4)
    yes = score(_r(t, True) for t in truth_seq)
    assert yes.accuracy == 0.5 and yes.kappa == 0.0  # chance agreement: κ 0
    no = score(_r(t, False) for t in truth_seq)
    assert no.accuracy == 0.5 and no.kappa == 0.0
    inv = score([_r(True, True), _r(False, False), _r(True, None), _r(False, True)])
    assert inv.probes == 4 and inv.valid == 3 and inv.correct == 2
    assert inv.accuracy == 0.5  # an invalid reply counts as wrong
    # κ on the 3 valid pairs (yes,yes), (no,no), (no,yes): p_o = 2/3, p_e = 1/3·2/3 + 2/3·1/3 = 4/9
    assert inv.kappa == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
    empty = score([])
    assert empty.accuracy is None and empty.kappa is None
