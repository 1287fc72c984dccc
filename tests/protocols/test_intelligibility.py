"""Definitions 1–2, the by-bound curves and the aggregation over repetitions (DESIGN §2)."""

from __future__ import annotations

import pytest

from pxp.protocols.pxp.intelligibility import (
    METRICS,
    SessionTags,
    count_repetition,
    flags_by_bound,
    session_flags,
    table1,
)
from pxp.protocols.pxp.rules import Sender, Tag

M, H = Sender.MACHINE, Sender.HUMAN
IN, RA, RF, RV, RJ = Tag.INIT, Tag.RATIFY, Tag.REFUTE, Tag.REVISE, Tag.REJECT

V1 = [(M, IN), (H, RA), (M, RA)]
V2 = [(M, IN), (H, RF), (M, RV), (H, RA), (M, RA)]
V4 = [(M, IN), (H, RF), (M, RF), (H, RJ)]
NAMES = list(METRICS)


def flags_row(tags: list[tuple[Sender, Tag]]) -> list[bool]:
    f = session_flags(tags)
    return [f[name] for name in NAMES]


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (V1, [True, True, True, True, True, False, False]),
        (V2, [True, True, True, False, True, False, True]),
        (V4, [False] * 7),
    ],
)
def test_design_vectors(tags: list[tuple[Sender, Tag]], expected: list[bool]) -> None:
    assert flags_row(tags) == expected


def test_init_is_excluded_and_an_agent_with_no_tags_is_not_strong() -> None:
    assert session_flags([(M, IN)]) == dict.fromkeys(METRICS, False)
    only_human = session_flags([(M, IN), (H, RA)])
    assert only_human["strong_human"] and not only_human["strong_machine"]
    assert only_human["one_way_human"] and not only_human["two_way"]


def test_one_way_uses_every_tag_not_just_the_last() -> None:
    # a REJECT earlier in the session rules out one-way intelligibility even if it ends well
    tags = [(M, IN), (H, RF), (M, RF), (H, RJ)]
    assert not session_flags(tags)["one_way_human"]
    tags = [(M, IN), (H, RA), (M, RF), (H, RF), (M, RV)]
    f = session_flags(tags)
    assert f["one_way_human"] and not f["strong_human"]
    assert f["one_way_machine"] and not f["strong_machine"]


def test_aborted_sessions_are_never_intelligible() -> None:
    assert session_flags(V1, aborted=True) == dict.fromkeys(METRICS, False)
    counts = count_repetition([SessionTags(tuple(V1)), SessionTags(tuple(V1), aborted=True)], 10)
    assert counts.total_sessions == 2 and counts.aborted_sessions == 1
    assert counts.metrics["two_way"] == 1


def test_by_bound_curves_for_vector_two() -> None:
    curves = flags_by_bound(V2, 6)
    # j=1: only INIT; j=2: human REFUTE; j=3: machine REVISE; j=4: human RATIFY
    assert curves["one_way_human"] == [False, False, False, True, True, True]
    assert curves["one_way_machine"] == [False, False, True, True, True, True]
    assert curves["two_way"] == [False, False, False, True, True, True]
    assert curves["ultra_strong_machine"] == [False, False, True, True, True, True]
    assert curves["strong_human"] == [False, False, False, False, False, False]


def test_aggregation_median_proportion_and_range() -> None:
    rep_a = [SessionTags(tuple(V1)), SessionTags(tuple(V2)), SessionTags(tuple(V4))]
    rep_b = [SessionTags(tuple(V1)), SessionTags(tuple(V4)), SessionTags(tuple(V4))]
    rep_c = [SessionTags(tuple(V2)), SessionTags(tuple(V2)), SessionTags(tuple(V2))]
    t = table1({1: rep_a, 2: rep_b, 3: rep_c}, 5)
    assert t.repetitions == 3 and t.total_sessions == 3
    two_way = t.metrics["two_way"]
    assert (two_way.count, two_way.min, two_way.max) == (2, 1, 3)
    assert two_way.proportion == pytest.approx(2 / 3)
    ultra = t.metrics["ultra_strong_machine"]
    assert (ultra.count, ultra.min, ultra.max) == (1, 0, 3)
    # by bound: at j=3 rep_a has V1 two-way (1), rep_b 1, rep_c 0 -> median 1
    assert t.by_message["two_way"][2] == 1
    assert t.by_message_min["two_way"][2] == 0 and t.by_message_max["two_way"][2] == 1
    assert t.by_message["two_way"][4] == 2
    js = t.as_json("x")
    assert js["metrics"]["two_way"] == {"count": 2, "proportion": 0.6667, "min": 1, "max": 3}  # type: ignore[index]


def test_even_number_of_repetitions_gives_a_half_median() -> None:
    t = table1({1: [SessionTags(tuple(V1))], 2: [SessionTags(tuple(V4))]}, 3)
    assert t.metrics["two_way"].count == 0.5
    assert t.as_json("x")["metrics"]["two_way"]["count"] == 0.5  # type: ignore[index]


def test_empty_experiment() -> None:
    t = table1({}, 10)
    assert t.repetitions == 0 and t.total_sessions == 0
    assert all(m.count == 0 and m.proportion == 0 for m in t.metrics.values())
