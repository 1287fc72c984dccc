"""The game's rules, pinned to clembench's privateshared master.py."""

from __future__ import annotations

import pytest

from pxp.protocols.scorekeeping import rules


def test_constants() -> None:
    assert rules.N_SLOTS == 5
    assert rules.N_PROBE_ROUNDS == 6
    assert rules.MAX_PROBE_ATTEMPTS == 5
    assert (rules.ANSWER_TAG, rules.ASIDE_TAG) == ("ANSWER:", "ASIDE:")


@pytest.mark.parametrize(("reply", "expected"), [
    ("ANSWER: Lisbon.", "Lisbon."),
    ("ANSWER:Lisbon", "Lisbon"),
    ("ANSWER: Lisbon.\n\n", "Lisbon."),       # trailing newlines are stripped first
    ("\nANSWER: Lisbon.", None),              # must start with the tag
    ("ANSWER: Lisbon.\nAnything else?", None),  # continuation after a line break
    ("answer: Lisbon.", None),                # the tag is case-sensitive
    ("ASIDE: Lisbon.", None),
    ("Lisbon.", None),
    ("ANSWER: ANSWER: x", "x"),               # clembench removes every occurrence of the tag
])
def test_parse_answer(reply: str, expected: str | None) -> None:
    assert rules.parse_answer(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ("ASIDE: yes", 1),
    ("ASIDE: Yes, they know.", 1),
    ("ASIDE:YES", 1),
    ("ASIDE: no", 0),
    ("ASIDE: No.\n", 0),
    ("ASIDE: not yet", 0),          # plain prefix test, as clembench
    ("ASIDE: maybe", None),
    ("ASIDE: yes\nbecause", None),  # continuation
    ("ANSWER: yes", None),          # wrong tag
    ("yes", None),
    ("aside: yes", None),
])
def test_parse_probe(reply: str, expected: int | None) -> None:
    assert rules.parse_probe(reply) == expected


def test_has_continuation_only_strips_newlines() -> None:
    assert not rules.has_continuation("ANSWER: x\n\n")
    assert rules.has_continuation("ANSWER: x\n ")  # a space after the break is a continuation


def test_probe_prompt_rephrasing() -> None:
    q = "Does the travel agent know where you want to go?"
    first = rules.probe_prompt(q, 1)
    # pinned: the empty first prefix leaves two spaces after ME:
    assert first == f"ME:  {q} Answer this question with yes or no and then stop."
    second = rules.probe_prompt(q, 2)
    assert second.startswith("ME: Please answer this question carefully. Does the")
    assert len({rules.probe_prompt(q, a) for a in range(1, 6)}) == 5
    with pytest.raises(ValueError):
        rules.probe_prompt(q, 6)
    with pytest.raises(ValueError):
        rules.probe_prompt(q, 0)


def test_slot_filling_is_case_insensitive_substring() -> None:
    assert rules.slot_filled("ANSWER: from LISBON, please", "Lisbon")
    assert not rules.slot_filled("ANSWER: from Porto", "Lisbon")


def test_anticipated_slots() -> None:
    slots = {"from": "Lisbon", "to": "Reykjavik", "by": "train"}
    realised = {"to": 0, "from": 1, "by": 2}
    assert rules.update_realised(realised, "ANSWER: Reykjavik, by Train", slots, 0) == ["by"]
    assert realised == {"to": 0, "from": 1, "by": 0}
    # a later mention never moves the turn back
    assert rules.update_realised(realised, "ANSWER: Lisbon and Reykjavik", slots, 1) == []
    assert realised == {"to": 0, "from": 1, "by": 0}


def test_ground_truth_shared_iff_round_after_turn() -> None:
    assert [rules.ground_truth(r, 2) for r in range(6)] == [0, 0, 0, 1, 1, 1]
    assert [rules.ground_truth(r, 0) for r in range(6)] == [0, 1, 1, 1, 1, 1]


def test_overlapping_values() -> None:
    assert rules.overlapping_values([("a", "Rome"), ("b", "Romeo")]) == [("Rome", "Romeo")]
    assert rules.overlapping_values([("a", "rome"), ("b", "Paris")]) == []
    assert rules.overlapping_values([("a", "Rome"), ("a", "Romeo")]) == []  # same slot: one value is drawn
