"""Instance generation (seeded, two domains, no overlapping values) and clembench instances.json parsing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from pxp.protocols.scorekeeping import instances as I
from pxp.protocols.scorekeeping import rules


def test_domains_as_in_the_paper() -> None:
    assert list(I.DOMAINS) == ["travel-booking", "job-interview"]
    assert list(I.TRAVEL.values) == ["from", "to", "by", "class", "when"]
    assert list(I.JOB.values) == ["bachelor", "industry experience", "highest education", "other skills",
                                  "availability"]
    for dom in I.DOMAINS.values():
        assert set(dom.requests) == set(dom.values) == set(dom.probe_questions)


@pytest.mark.parametrize("domain", list(I.DOMAINS))
def test_no_slot_value_contains_another(domain: str) -> None:
    assert I.check_domain(I.DOMAINS[domain]) == []
    for inst in I.generate(domain, seed=7, n=50):
        assert rules.overlapping_values(inst.slots.items()) == []


@pytest.mark.parametrize("domain", list(I.DOMAINS))
def test_generate_is_seeded(domain: str) -> None:
    a, b, c = I.generate(domain, seed=1), I.generate(domain, seed=1), I.generate(domain, seed=2)
    assert len(a) == I.N_INSTANCES == 10
    assert [x.to_dict() for x in a] == [x.to_dict() for x in b]
    assert [x.to_dict() for x in a] != [x.to_dict() for x in c]
    for inst in a:
        assert sorted(inst.request_order) == sorted(inst.slots)
        assert list(inst.probes) == list(range(6))
        assert all(sorted(p) == sorted(inst.slots) for p in inst.probes.values())
        for value in inst.slots.values():
            assert value in inst.initial_prompt
        assert f'"{I.DOMAINS[domain].tag}:"' in inst.initial_prompt


def test_unknown_domain() -> None:
    with pytest.raises(I.InstanceError, match="unknown domain"):
        I.generate("restaurant")


def test_instances_json_round_trip() -> None:
    data = json.loads(json.dumps(I.generate_experiments(seed=3, n=2)))
    parsed = I.parse_instances(data)
    assert [(i.experiment, i.game_id) for i in parsed] == [("travel-booking", 0), ("travel-booking", 1),
                                                           ("job-interview", 0), ("job-interview", 1)]
    assert parsed[0].to_dict() == data["experiments"][0]["game_instances"][0]
    assert list(parsed[0].probes[0]) == list(data["experiments"][0]["game_instances"][0]["probes"]["0"])


def test_clembench_instance_of_another_domain_gets_generic_texts() -> None:
    game = {"game_id": 4, "tag": "WAITER", "lang": "en", "initial_prompt": "You are at a restaurant.",
            "slots": {"drink": "water", "food": "soup", "dessert": "cake", "table": "by the window", "pay": "cash"},
            "request_order": ["food", "drink", "dessert", "table", "pay"], "requests": {"food": 1},
            "probes": {str(r): {"drink": 0, "food": 1, "dessert": 0, "table": 0, "pay": 1} for r in range(6)},
            "extra_field": 1}
    inst = I.parse_instances({"experiments": [{"name": "2_restaurant", "game_instances": [game]}]})[0]
    assert inst.question("food") == "What is your food?"
    assert inst.probe_question(3, "pay") == "Has the questioner been informed about your pay?"
    assert inst.to_dict()["extra_field"] == 1


def _data() -> dict[str, Any]:
    return copy.deepcopy(I.generate_experiments(seed=3, n=1))


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.pop("experiments"), "instances.experiments: missing"),
    (lambda d: d["experiments"][0].pop("name"), "experiments[0].name: missing"),
    (lambda d: d["experiments"][1]["game_instances"][0].pop("slots"), "experiments[1].game_instances[0].slots"),
    (lambda d: d["experiments"][0]["game_instances"][0].__setitem__("request_order", ["from"]), "request_order"),
    (lambda d: d["experiments"][0]["game_instances"][0]["probes"].pop("5"), "probes.5"),
    (lambda d: d["experiments"][0]["game_instances"][0].__setitem__("game_id", "x"), "game_id: expected int"),
    (lambda d: d["experiments"][0]["game_instances"][0].__setitem__("game_id", "1"), "game_id: expected int, got str"),
    (lambda d: d["experiments"][0]["game_instances"].append(copy.deepcopy(d["experiments"][0]["game_instances"][0])),
     "game_instances[1].game_id: 0 is also game_instances[0]'s; each game_id once per experiment"),
    (lambda d: d["experiments"][0]["game_instances"][0]["slots"].update({"from": "Lis\x00bon"}),
     "slots.from: contains the control character U+0000"),
    (lambda d: d["experiments"][0]["game_instances"][0]["slots"].update({"from": "Lisbon", "to": "Lisbon Oriente"}),
     "slots: value 'Lisbon' is contained in 'Lisbon Oriente'"),
])
def test_bad_instances_name_the_field(mutate: Any, field: str) -> None:
    d = _data()
    mutate(d)
    with pytest.raises(I.InstanceError) as err:
        I.parse_instances(d)
    assert field in str(err.value)


@pytest.mark.parametrize("domain", list(I.DOMAINS))
def test_every_generated_instance_is_coherent(domain: str) -> None:
    """Values are drawn from combinations that go together (the domain's requirements), for many seeds."""
    dom = I.DOMAINS[domain]
    seen: set[tuple[str, ...]] = set()
    for seed in range(40):
        for inst in I.generate(domain, seed=seed, n=10):
            assert dom.incoherent(inst.slots) == [], inst.slots
            seen.add(tuple(inst.slots.values()))
    assert len(seen) > 100  # the rules leave plenty of variety
    for values in dom.values.values():  # every value can still be drawn
        assert any(v in s for s in seen for v in values)


def test_incoherent_combinations_are_named() -> None:
    bad = {"from": "Glasgow", "to": "Edinburgh", "by": "coach", "class": "second class", "when": "this weekend"}
    problems = I.TRAVEL.incoherent(bad)
    assert any("class 'second class'" in p and "coaches have one class" in p for p in problems)
    assert any("Edinburgh is an hour from Glasgow" in p for p in problems)
    assert I.TRAVEL.incoherent({**bad, "from": "Krakow", "by": "train"}) == []
    assert I.JOB.incoherent({"bachelor": "Bachelor of Fine Arts", "industry experience": "two years as a nurse",
                             "highest education": "MBA", "other skills": "web design",
                             "availability": "immediately"}) == ["industry experience 'two years as a nurse' with "
                                                                 "bachelor 'Bachelor of Fine Arts': nursing follows "
                                                                 "a science bachelor"]


def test_abort_reason_names_the_rule_and_the_reply() -> None:
    from pxp.protocols.scorekeeping.aborts import abort_reason
    from pxp.protocols.scorekeeping.episode import play_episode

    inst = I.generate("travel-booking", seed=1, n=1)[0]
    ok = play_episode(inst, ["ASIDE: no"] * 5 + ["ANSWER: it is fine\nand more"])
    assert ok.aborted and abort_reason(ok) == (
        "reply 6 ('ANSWER: it is fine and more') broke the answer rule (it goes on after a line break): "
        "an answer starts with ANSWER: and stays on one line")
    probes = play_episode(inst, ["ASIDE: maybe"] * 5)
    assert abort_reason(probes) == (
        "reply 5 ('ASIDE: maybe') was the 5th invalid reply to a private question (after ASIDE: it does not "
        "start with yes or no): a private reply starts with ASIDE: then yes or no, on one line")
