"""The episode state machine: dialogue context, probes, records and interactions.json validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from sk_helpers import ORDER, PROBE_ORDER, SLOTS, Scripted, instance

from pxp.protocols.scorekeeping import rules
from pxp.protocols.scorekeeping.episode import (
    OK_REPLY,
    RecordError,
    RepliesExhausted,
    from_interactions,
    play_episode,
)
from pxp.protocols.scorekeeping.scores import score_interactions


def test_probes_never_enter_the_dialogue_context() -> None:
    ans = Scripted()
    rec = play_episode(instance(), ans, model="m")
    answers = [r for r in ans.requests if r.kind == "answer"]
    probes = [r for r in ans.requests if r.kind == "probe"]
    assert len(answers) == 5 and len(probes) == 30
    for req in answers:
        assert not any("ME:" in m["content"] or "ASIDE:" in m["content"] for m in req.messages[1:])
    # each probe = the dialogue so far + exactly one probe message
    last = probes[-1]
    assert last.messages[:-1] == rec.dialogue
    assert last.messages[-1]["content"].startswith("ME:  ")
    assert rec.dialogue[0]["content"] == instance().initial_prompt
    assert rec.dialogue[1] == {"role": "assistant", "content": OK_REPLY}
    assert len(rec.dialogue) == 2 + 2 * 5
    assert rec.dialogue[2]["content"].startswith("TRAVEL-AGENT: Where do you want to go?")


def test_order_of_requests_and_probes() -> None:
    ans = Scripted()
    play_episode(instance(), ans)
    assert [r.slot for r in ans.requests if r.kind == "answer"] == ORDER
    assert [r.slot for r in ans.requests if r.kind == "probe"][:5] == PROBE_ORDER
    assert [r.probe_round for r in ans.requests if r.kind == "probe"][::5] == [0, 1, 2, 3, 4, 5]


def test_probe_fields_as_clembench() -> None:
    logs = play_episode(instance(), Scripted()).to_interactions()
    p = logs["probes"][3][0]
    assert set(p) == {"target", "question", "gt", "answer", "value", "tries"}
    assert p["target"] == "FROM" and p["gt"] == 1 and p["value"] == 1 and p["tries"] == 1
    assert p["question"].startswith("ME: Does the travel agent know where you are travelling from?")
    assert logs["players"]["Player 1"] == "Answerer: unknown"
    assert [[p["gt"] for p in rnd] for rnd in logs["probes"]][2] == [1, 1, 0, 0, 0]


def test_sequence_of_replies() -> None:
    seq = []
    for r in range(6):
        if r:
            seq.append(f"ANSWER: {SLOTS[ORDER[r - 1]]}")
        seq += ["ASIDE: yes" if r > ORDER.index(s) else "ASIDE: no" for s in PROBE_ORDER]
    rec = play_episode(instance(), seq)
    assert score_interactions(rec.to_interactions())["episode scores"]["Main Score"] == 100.0
    with pytest.raises(RepliesExhausted):
        play_episode(instance(), seq[:-1])


def test_round_trip_through_interactions() -> None:
    rec = play_episode(instance(), Scripted(answers={0: "ANSWER: Reykjavik from Lisbon"}))
    back = from_interactions(copy.deepcopy(rec.to_interactions()))
    assert back.to_interactions() == rec.to_interactions()
    assert back.dialogue == rec.dialogue


def _logs() -> dict[str, Any]:
    return copy.deepcopy(play_episode(instance(), Scripted()).to_interactions())


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.pop("probes"), "probes: missing"),
    (lambda d: d.pop("Aborted"), "Aborted: missing"),
    (lambda d: d.pop("Request Count"), "Request Count: missing"),
    (lambda d: d.__setitem__("Played Probe Rounds", "6"), "Played Probe Rounds:"),
    (lambda d: d.__setitem__("Played Probe Rounds", 7), "probes: expected a list of at least 7"),
    (lambda d: d["probes"][1][0].pop("gt"), "probes[1][0].gt"),
    (lambda d: d["probes"][2][3].pop("value"), "probes[2][3].value"),
    (lambda d: d["probes"][4][1].__setitem__("answer", "REPLY: yes"), "probes[4][1].answer"),
    (lambda d: d["probes"][0][0].__setitem__("tries", 9), "probes[0][0].tries"),
    (lambda d: d.__setitem__("Filled Slots", ["yes"]), "Filled Slots:"),
    (lambda d: d.__setitem__("realised_slots", []), "realised_slots:"),
    (lambda d: d["turns"][1][3]["action"].__setitem__("content", "REPLY: Reykjavik"), "turns[1][3].action.content"),
])
def test_bad_interactions_name_the_field(mutate: Any, field: str) -> None:
    d = _logs()
    mutate(d)
    with pytest.raises(RecordError) as err:
        from_interactions(d)
    assert field in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_tag_reply_is_fine_when_recorded_invalid() -> None:
    # an invalid reply that the record itself marks as violated is a normal outcome, not bad input
    rec = play_episode(instance(), Scripted(probe=lambda r, s: "REPLY: yes" if (r, s) == (1, "to") else
                                             r > ORDER.index(s)))
    logs = rec.to_interactions()
    assert logs["Aborted"] is True and logs["probes"][1][1]["value"] == rules.INVALID_LABEL
    assert from_interactions(logs).aborted is True
