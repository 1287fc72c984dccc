"""The pure protocol core: the AGENT rule, the stop rule, turns and conformance (DESIGN §1)."""

from __future__ import annotations

import itertools

import pytest

from pxp.protocols.pxp.rules import (
    Msg,
    ProtocolError,
    Sender,
    Tag,
    agent_tag,
    check_tag,
    conformance,
    implied_facts,
    next_sender,
    stop_reason,
    tag_reason,
)

M, H = Sender.MACHINE, Sender.HUMAN


def msgs(*spec: tuple[Sender, Tag]) -> list[Msg]:
    return [Msg(j, s, t) for j, (s, t) in enumerate(spec, start=1)]


# --- AGENT rule ---------------------------------------------------------------------------


def test_message_one_is_always_init() -> None:
    for match, agree, changed in itertools.product([True, False], repeat=3):
        assert agent_tag(1, 3, match, agree, changed) is Tag.INIT


@pytest.mark.parametrize(
    ("match", "agree", "changed", "j", "k", "expected"),
    [
        (True, True, False, 2, 3, Tag.RATIFY),
        (True, True, True, 5, 3, Tag.RATIFY),
        (True, False, False, 4, 3, Tag.REFUTE),
        (True, False, True, 4, 3, Tag.REVISE),
        (False, True, False, 4, 3, Tag.REFUTE),
        (False, True, True, 4, 3, Tag.REVISE),
        (False, False, False, 4, 3, Tag.REJECT),
        (False, False, True, 4, 3, Tag.REJECT),
        (False, False, False, 3, 3, Tag.REFUTE),
        (False, False, True, 3, 3, Tag.REVISE),
        (False, False, False, 2, 1, Tag.REJECT),
    ],
)
def test_agent_rule_table(match: bool, agree: bool, changed: bool, j: int, k: int, expected: Tag) -> None:
    assert agent_tag(j, k, match, agree, changed) is expected


def test_revise_impossible_at_message_two() -> None:
    for match, agree in itertools.product([True, False], repeat=2):
        assert agent_tag(2, 3, match, agree, False) is not Tag.REVISE
    with pytest.raises(ProtocolError, match="message 2"):
        agent_tag(2, 3, True, False, True)


def test_reject_impossible_while_j_at_most_k() -> None:
    for j in range(2, 6):
        for match, agree, changed in itertools.product([True, False], repeat=3):
            if j == 2 and changed:
                continue
            tag = agent_tag(j, 5, match, agree, changed)
            assert tag is not Tag.REJECT


def test_message_numbers_start_at_one() -> None:
    with pytest.raises(ProtocolError):
        agent_tag(0, 3, True, True, False)


def test_tag_reasons_are_plain_english() -> None:
    assert "matches" in tag_reason(4, 3, True, True, False)
    assert "past k = 3" in tag_reason(4, 3, False, False, False)
    assert "REJECT only after message 3" in tag_reason(3, 3, False, False, False)
    assert "revised" in tag_reason(4, 3, True, False, True)


# --- chosen tags (the chemist picks the tag) ----------------------------------------------------


def test_check_tag_accepts_the_rule_and_refuses_the_rest() -> None:
    assert check_tag(Tag.RATIFY, 4, 3, True, True, False) is None
    assert "message 2" in (check_tag(Tag.REVISE, 2, 3, True, False, False) or "")
    assert "not edited" in (check_tag(Tag.REVISE, 4, 3, True, False, False) or "")
    assert "after message 3" in (check_tag(Tag.REJECT, 3, 3, False, False, False) or "")
    assert "RATIFY needs" in (check_tag(Tag.RATIFY, 4, 3, False, True, True) or "")
    assert "edited" in (check_tag(Tag.REFUTE, 4, 3, True, False, True) or "")
    assert "INIT" in (check_tag(Tag.INIT, 4, 3, True, True, False) or "")


def test_implied_facts_for_a_chosen_tag() -> None:
    assert implied_facts(Tag.RATIFY, 4, 3) == (True, True, False)
    assert implied_facts(Tag.REJECT, 4, 3) == (False, False, False)
    assert implied_facts(Tag.REVISE, 4, 3) == (True, False, True)
    assert implied_facts(Tag.REFUTE, 4, 3, match=False, agree=True) == (False, True, False)
    # inconsistent hints are replaced by facts that give the tag
    m, a, c = implied_facts(Tag.REFUTE, 4, 3, match=True, agree=True)
    assert agent_tag(4, 3, m, a, c) is Tag.REFUTE
    with pytest.raises(ProtocolError, match="after message 3"):
        implied_facts(Tag.REJECT, 3, 3)
    with pytest.raises(ProtocolError, match="message 2"):
        implied_facts(Tag.REVISE, 2, 3)


# --- stop rule and turns ------------------------------------------------------------------------


def test_stop_needs_latest_tags_both_ratify_not_ever() -> None:
    s = msgs((M, Tag.INIT), (H, Tag.RATIFY), (M, Tag.REFUTE))
    assert stop_reason(s, 10) is None
    s = msgs((M, Tag.INIT), (H, Tag.RATIFY), (M, Tag.REFUTE), (H, Tag.RATIFY))
    assert stop_reason(s, 10) is None  # machine's latest is REFUTE
    s = msgs((M, Tag.INIT), (H, Tag.RATIFY), (M, Tag.REFUTE), (H, Tag.RATIFY), (M, Tag.RATIFY))
    assert stop_reason(s, 10) == "ratified"
    s = msgs((M, Tag.INIT), (H, Tag.RATIFY), (M, Tag.RATIFY))
    assert stop_reason(s, 10) == "ratified"


def test_stop_on_reject_and_on_bound() -> None:
    s = msgs((M, Tag.INIT), (H, Tag.REFUTE), (M, Tag.REFUTE), (H, Tag.REJECT))
    assert stop_reason(s, 10) == "rejected"
    s = msgs((M, Tag.INIT), (H, Tag.REFUTE), (M, Tag.REFUTE))
    assert stop_reason(s, 3) == "bound"
    assert stop_reason([], 3) is None


def test_whose_turn() -> None:
    assert next_sender([], 10) is M
    assert next_sender(msgs((M, Tag.INIT)), 10) is H
    assert next_sender(msgs((M, Tag.INIT), (H, Tag.REFUTE)), 10) is M
    assert next_sender(msgs((M, Tag.INIT), (H, Tag.RATIFY), (M, Tag.RATIFY)), 10) is None
    assert next_sender(msgs((M, Tag.INIT)), 1) is None


# --- conformance --------------------------------------------------------------------------------

GOOD = [
    Msg(1, M, Tag.INIT, "a", "x"),
    Msg(2, H, Tag.REFUTE, "b", "y", False, False, False),
    Msg(3, M, Tag.REVISE, "b", "y", False, False, True),
    Msg(4, H, Tag.RATIFY, "b", "y", True, True, False),
    Msg(5, M, Tag.RATIFY, "b", "y", True, True, False),
]


def reasons(messages: list[Msg], n: int = 10, k: int = 3, status: str = "finished") -> str:
    return " | ".join(str(v) for v in conformance(messages, n, k, status=status))


def test_a_good_session_conforms() -> None:
    assert conformance(GOOD, 10, 3) == []
    assert conformance(GOOD[:3], 10, 3, status="open") == []
    assert conformance(GOOD[:3], 10, 3, status="aborted") == []


def test_conformance_names_each_rule() -> None:
    swapped = [Msg(1, H, Tag.INIT), *GOOD[1:]]
    assert "senders alternate" in reasons(swapped)
    assert "message 1 must be INIT" in reasons([Msg(1, M, Tag.RATIFY), *GOOD[1:]])
    assert "only message 1 may be INIT" in reasons([GOOD[0], Msg(2, H, Tag.INIT), *GOOD[2:]])
    early_reject = [GOOD[0], Msg(2, H, Tag.REFUTE), Msg(3, M, Tag.REJECT)]
    assert "message 3: REJECT is only allowed after message k = 3" in reasons(early_reject)
    assert "REVISE is impossible at message 2" in reasons([GOOD[0], Msg(2, H, Tag.REVISE)], status="open")
    after_stop = [GOOD[0], Msg(2, H, Tag.RATIFY), Msg(3, M, Tag.RATIFY), Msg(4, H, Tag.RATIFY)]
    assert "message 4: sent after the session had stopped (ratified at message 3)" in reasons(after_stop)
    assert "no stop condition holds" in reasons(GOOD[:3])
    assert "stopped but is still marked open" in reasons(GOOD, status="open")
    wrong_facts = [*GOOD[:3], Msg(4, H, Tag.RATIFY, "b", "y", True, False, False)]
    assert "message 4: tagged RATIFY but its stored facts" in reasons(wrong_facts, status="open")
    gap = [GOOD[0], GOOD[1], Msg(4, M, Tag.REFUTE)]
    assert "expected 3" in reasons(gap, status="open")
    beyond = [GOOD[0], Msg(2, H, Tag.REFUTE), Msg(3, M, Tag.REFUTE)]
    assert "sent after the message bound n = 2" in reasons(beyond, n=2)
    assert "changed is true at message 2" in reasons(
        [GOOD[0], Msg(2, H, Tag.REFUTE, "", "", True, False, True)], status="open"
    )
    assert "no messages" in reasons([])


def test_an_aborted_session_must_end_before_a_stop() -> None:
    """The engine only aborts an open session, and a stop closes it in the same transaction:
    an "aborted" session whose messages reached a stop would be counted apart although the
    protocol finished it (DESIGN §1, §2)."""
    assert "stopped (ratified at message 5) but is marked aborted" in reasons(GOOD, status="aborted")
    rejected = [GOOD[0], Msg(2, H, Tag.REFUTE), Msg(3, M, Tag.REFUTE), Msg(4, H, Tag.REJECT)]
    assert "stopped (rejected at message 4) but is marked aborted" in reasons(rejected, status="aborted")
    assert "stopped (bound at message 2)" in reasons(GOOD[:2], n=2, status="aborted")
    assert conformance(GOOD[:4], 10, 3, status="aborted") == []
    assert conformance([], 10, 3, status="aborted") == []  # aborted before its first message


def test_parse_tags_and_senders_in_any_case() -> None:
    assert Tag.parse(" ratify ") is Tag.RATIFY
    assert Sender.parse("Machine") is M and Sender.parse("h") is H
    with pytest.raises(ValueError, match="unknown tag"):
        Tag.parse("AGREE")
    with pytest.raises(ValueError, match="unknown sender"):
        Sender.parse("oracle")
