"""Published clembench-runs layouts (privateshared in v0.9, v1.0, v2.0), rebuilt by hand key for key.

The episodes below copy the *structure* of real files in clembench/clembench-runs (keys, nesting, event
types, the 0/1/2 labels, tries and request counts) with made-up text; each scores.json holds the values
clembench published for that structure (NaN as the NaN literal). Reading must give exactly those scores.
Real files they follow (see the issue-12 follow-up report):
  v0.9/claude-v1.3-t0.0--claude-v1.3-t0.0/privateshared/1_job-interview/episode_4     (played; no coda)
  v1.0/CodeLlama-34b-Instruct-hf-t0.0--.../privateshared/0_travel-booking/episode_9   (aborted in round 0)
  v1.0/CodeLlama-34b-Instruct-hf-t0.0--.../privateshared/4_letter-number/episode_1   (10 slots, aborted)
  v2.0/gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0/privateshared/0_travel-booking/episode_0 (coda)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pxp.data.scorekeeping.clembench import GAME, read_results

NaN = float("nan")
Probe = tuple[int, int, int, str]
"""(gt, value, tries, the last reply) as clembench logs them in `probes`."""

OLD_ASK = "Please answer yes or no."  # v0.9 / v1.0 probe wording
NEW_ASK = "Answer this question with yes or no and then stop."  # v1.6 / v2.0
CODA = " Answer only this question in one short sentence and then stop."  # v1.6 / v2.0 requests
RETRIES = ["", "Please answer this question carefully.", "Please follow my instructions.",
           "Please be specific now.", "Please think about it carefully."]


class _Log:
    """Events exactly as clembench's GameRecorder writes them: from, to, timestamp, action{type, content}."""

    def __init__(self) -> None:
        self.turns: list[list[dict[str, Any]]] = []
        self.n = 0

    def ev(self, frm: str, to: str, kind: str, content: str) -> None:
        self.n += 1
        self.turns[-1].append({"from": frm, "to": to, "timestamp": f"2023-06-06T12:44:{self.n % 60:02d}.551220",
                               "action": {"type": kind, "content": content}})


def _probing(log: _Log, targets: list[str], rnd: list[Probe], ask: str) -> list[dict[str, Any]]:
    log.ev("GM", "GM", "info", "Begin probing")
    out = []
    for target, (gt, value, tries, reply) in zip(targets, rnd, strict=False):
        question = f"ME: Does the other side know your {target.lower()}? {ask}"
        attempts = min(tries, 5)
        for a in range(1, attempts + 1):
            log.ev("GM", "Player 1", "probe question", question.replace("ME: ", f"ME: {RETRIES[a - 1]} "))
            last = a == attempts
            log.ev("Player 1", "GM", "probe answer", reply if last else "ANSWER: No.")
            log.ev("GM", "GM", "parse", {0: "no", 1: "yes"}.get(value, "NA") if last else "NA")
        log.ev("GM", "GM", "metadata", f"Answer for {target} valid after {tries} tries." if value != 2
               else f"Answer for {target} invalid after max attempts.")
        log.ev("GM", "GM", "check", "Answer is {}correct.".format("" if gt == value else "in"))
        out.append({"target": target, "question": question, "gt": gt, "answer": reply, "value": value,
                    "tries": tries})
    log.ev("GM", "GM", "info", "End probing")
    return out


def episode(*, model: str, tag: str, targets: list[str], realised: dict[str, int], rounds: list[list[Probe]],
            answers: list[str], counts: tuple[list[int], list[int], list[int]], aborted: bool, played: int,
            ask: str = OLD_ASK, coda: str = "") -> dict[str, Any]:
    """One interactions.json: `rounds[r]` are the probes of round r (an aborted round included)."""
    log = _Log()
    log.turns.append([])
    log.ev("GM", "Player 1", "send message", "You have private details; the other side does not know them yet.")
    probes = [_probing(log, targets, rounds[0], ask)]
    for r, answer in enumerate(answers, start=1):
        log.turns.append([])
        log.ev("GM", "Player 2", "send message", "What is the next request?")
        log.ev("Player 2", "GM", "get message", f"Question {r}?")
        log.ev("GM", "Player 1", "send message", f"{tag}: Question {r}?{coda}")
        log.ev("Player 1", "GM", "get message", answer)
        log.ev("GM", "GM", "parse", answer.replace("ANSWER:", "").strip())
        log.ev("GM", "GM", "metadata", "Slot filled: True")
        log.ev("GM", "Player 2", "send message", answer.replace("ANSWER:", "").strip())
        if r < len(rounds):
            probes.append(_probing(log, targets, rounds[r], ask))
    if aborted:
        log.ev("GM", "GM", "invalid format", "Abort: invalid format in probing.")
    log.ev("GM", "GM", "end", "Game finished.")
    return {"players": {"GM": "Game master for privateshared", "Player 1": f"Answerer: {model}",
                        "Player 2": "Questioner: Programmatic"},
            "turns": log.turns, "probes": probes, "realised_slots": realised,
            "Request Count": counts[0], "Parsed Request Count": counts[1], "Violated Request Count": counts[2],
            "Filled Slots": [True] * len(answers), "Aborted": aborted, "Played Probe Rounds": played}


def _rounds(gts: list[list[int]], values: list[list[int]], tries: list[list[int]] | None = None,
            replies: dict[tuple[int, int], str] | None = None) -> list[list[Probe]]:
    out = []
    for r, (g, v) in enumerate(zip(gts, values, strict=True)):
        t = tries[r] if tries else [1] * len(g)
        out.append([(g[i], v[i], t[i], (replies or {}).get((r, i), {0: "ASIDE: No.", 1: "ASIDE: Yes.",
                                                                     2: "ANSWER: I am not sure."}[v[i]]))
                    for i in range(len(g))])
    return out


def _turn(req: int, parsed: int, violated: int, acc: float, filled: int | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"Request Count": req, "Parsed Request Count": parsed, "Violated Request Count": violated,
                         "Accuracy": acc}
    if filled is not None:
        t["Slot Filled?"] = filled
    return t


def _aborted_scores(req: int, parsed: int, violated: int, ratio: float, middle: bool) -> dict[str, Any]:
    ep: dict[str, Any] = {"Middle-Accuracy": NaN} if middle else {}
    ep.update({"Accuracy": NaN, "Kappa": NaN, "Truncated Kappa": NaN, "Slot-Filling-Accuracy": NaN,
               "Main Score": NaN, "Aborted": 1, "Lose": 0, "Success": 0, "Request Count": req,
               "Parsed Request Count": parsed, "Violated Request Count": violated, "Request Success Ratio": ratio})
    return ep


def v09_played() -> tuple[dict[str, Any], dict[str, Any]]:
    """v0.9 job-interview: 5 slots, six played rounds, requests without the coda."""
    targets = ["BACHELOR", "INDUSTRY-EXPERIENCE", "HIGHEST-EDUCATION", "OTHER-SKILLS", "AVAILABILITY"]
    gts = [[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 0, 1], [1, 1, 1, 0, 1], [1, 1, 1, 1, 1]]
    vals = [[0, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 0, 0, 1]]
    inter = episode(model="claude-v1.3", tag="RECRUITER", targets=targets,
                    realised={"industry-experience": 0, "highest-education": 1, "availability": 2, "bachelor": 1,
                              "other-skills": 4},
                    rounds=_rounds(gts, vals, replies={(0, 0): "ASIDE: No"}),
                    answers=["ANSWER: Ten years."] * 5,
                    counts=([5, 6, 6, 6, 6, 6], [5, 6, 6, 6, 6, 6], [0] * 6), aborted=False, played=6)
    accs = [1.0, 0.8, 0.6, 0.8, 0.4, 0.6]
    scores = {"turn scores": {str(t): _turn(5 if t == 0 else 6, 5 if t == 0 else 6, 0, accs[t],
                                            None if t == 0 else 1) for t in range(6)},
              "episode scores": {"Middle-Accuracy": 0.6, "Accuracy": 0.7, "Kappa": 0.4255319148936171,
                                 "Truncated Kappa": 0.4255319148936171, "Slot-Filling-Accuracy": 1.0,
                                 "Main Score": 59.70149253731344, "Aborted": 0, "Lose": 1, "Success": 0,
                                 "Request Count": 35, "Parsed Request Count": 35, "Violated Request Count": 0,
                                 "Request Success Ratio": 1.0}}
    return inter, scores


def v10_aborted_first_round() -> tuple[dict[str, Any], dict[str, Any]]:
    """v1.0 travel-booking aborted in round 0: probing went on after the invalid probe (value 2, tries 6),
    and replies with a continuation ("ASIDE: No, ...\\n\\nANSWER: No.") were recorded as valid."""
    targets = ["FROM", "TO", "BY", "CLASS", "WHEN"]
    rnd = [(0, 2, 6, "ANSWER: No, not yet."), (0, 0, 5, "ASIDE: No, the agent does not know it yet."),
           (0, 0, 1, "ASIDE: No, not yet.\n\nANSWER: No."), (0, 0, 5, "ASIDE: No, not yet.\n\nANSWER: No."),
           (0, 0, 1, "ASIDE: No, not yet.\n\nANSWER: No.")]
    inter = episode(model="CodeLlama-34b-Instruct-hf", tag="TRAVEL-AGENT", targets=targets,
                    realised={"from": 0, "by": 1, "to": 2, "class": 3, "when": 4}, rounds=[rnd], answers=[],
                    counts=([17, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0], [13, 0, 0, 0, 0, 0]), aborted=True, played=0)
    return inter, {"turn scores": {}, "episode scores": _aborted_scores(17, 4, 13, 0.23529411764705882, False)}


def v10_letters_aborted() -> tuple[dict[str, Any], dict[str, Any]]:
    """v1.0 letter-number: 10 slots (11 rounds), aborted in round 5 after 5 played rounds; the aborted round
    is in `probes` (one probe value 2, the others still asked), Middle-Accuracy is NaN."""
    targets = list("ABCDEFGHIJ")
    realised = {"f": 0, "j": 1, "b": 2, "e": 3, "d": 4, "g": 5, "h": 6, "a": 7, "c": 8, "i": 9}
    gts = [[1 if r > realised[s.lower()] else 0 for s in targets] for r in range(6)]
    vals = [[0] * 10, [0] * 10, [0, 1, 0, 1, 1, 0, 1, 1, 1, 0], [1, 0, 1, 1, 1, 1, 1, 1, 1, 0],
            [1, 1, 1, 1, 0, 1, 1, 1, 1, 1], [1, 1, 2, 1, 1, 1, 1, 1, 1, 0]]
    tries = [[1] * 10, [1] * 10, [1] * 10, [1, 1, 3, 1, 1, 1, 1, 1, 1, 1], [1, 1, 5, 1, 5, 1, 5, 5, 5, 1],
             [5, 5, 6, 5, 5, 5, 5, 5, 5, 5]]
    inter = episode(model="CodeLlama-34b-Instruct-hf", tag="QUESTIONER", targets=targets, realised=realised,
                    rounds=_rounds(gts, vals, tries, {(1, 0): "ASIDE: No, the questioner does not know it."}),
                    answers=["ANSWER: 2130."] * 5,
                    counts=([10, 11, 11, 13, 31, 51, 0, 0, 0, 0, 0], [10, 11, 11, 11, 11, 10, 0, 0, 0, 0, 0],
                            [0, 0, 0, 2, 20, 41, 0, 0, 0, 0, 0]), aborted=True, played=5)
    turns = {"0": _turn(10, 10, 0, 1.0), "1": _turn(11, 11, 0, 0.9, 1), "2": _turn(11, 11, 0, 0.2, 1),
             "3": _turn(13, 11, 2, 0.1, 1), "4": _turn(31, 11, 20, 0.3, 1)}
    return inter, {"turn scores": turns, "episode scores": _aborted_scores(127, 64, 63, 0.5039370078740157, True)}


def v20_played() -> tuple[dict[str, Any], dict[str, Any]]:
    """v2.0 travel-booking: the coda after each request, the new probe wording; κ 0.6, Main Score 74.99...."""
    targets = ["FROM", "TO", "BY", "CLASS", "WHEN"]
    realised = {"to": 0, "when": 1, "by": 2, "from": 3, "class": 4}
    gts = [[1 if r > realised[s.lower()] else 0 for s in targets] for r in range(6)]
    vals = [[0] * 5, [1, 0, 0, 0, 0], [1, 1, 0, 0, 1], [0, 1, 0, 1, 1], [1, 1, 1, 0, 0], [1] * 5]
    inter = episode(model="gpt-4o-2024-08-06", tag="TRAVEL-AGENT", targets=targets, realised=realised,
                    rounds=_rounds(gts, vals), answers=["ANSWER: Lisbon."] * 5,
                    counts=([5, 6, 6, 6, 6, 6], [5, 6, 6, 6, 6, 6], [0] * 6), aborted=False, played=6,
                    ask=NEW_ASK, coda=CODA)
    accs = [1.0, 0.6, 0.8, 0.6, 0.8, 1.0]
    scores = {"turn scores": {str(t): _turn(5 if t == 0 else 6, 5 if t == 0 else 6, 0, accs[t],
                                            None if t == 0 else 1) for t in range(6)},
              "episode scores": {"Middle-Accuracy": 0.8, "Accuracy": 0.8, "Kappa": 0.6, "Truncated Kappa": 0.6,
                                 "Slot-Filling-Accuracy": 1.0, "Main Score": 74.99999999999999, "Aborted": 0,
                                 "Lose": 1, "Success": 0, "Request Count": 35, "Parsed Request Count": 35,
                                 "Violated Request Count": 0, "Request Success Ratio": 1.0}}
    return inter, scores


FIXTURES = {
    ("v0.9", "claude-v1.3-t0.0--claude-v1.3-t0.0", "1_job-interview", 4): v09_played,
    ("v1.0", "CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0", "0_travel-booking", 9):
        v10_aborted_first_round,
    ("v1.0", "CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0", "4_letter-number", 1):
        v10_letters_aborted,
    ("v2.0", "gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0", "0_travel-booking", 0): v20_played,
}


def write_runs(root: Path) -> dict[str, dict[str, Any]]:
    """A clembench-runs tree with the side files real runs have; returns the published scores per model key."""
    published = {}
    for (version, pair, experiment, k), make in FIXTURES.items():
        inter, scores = make()
        ep = root / version / pair / GAME / experiment / f"episode_{k}"
        ep.mkdir(parents=True)
        (ep / "interactions.json").write_text(json.dumps(inter))
        (ep / "scores.json").write_text(json.dumps(scores))  # NaN → the NaN literal, as clembench's json.dump
        (ep / "requests.json").write_text(json.dumps([{"timestamp": "2023-06-06", "manipulated_prompt_obj": []}]))
        (ep / "transcript.html").write_text("<html></html>")
        (ep / "instance.json").write_text(json.dumps({"game_id": k, "tag": "X", "slots": {"a": "1"}}))
        name = experiment.split("_", 1)[1]
        (ep.parent / f"experiment_{name}.json").write_text(json.dumps(
            {"name": name, "timestamp": "2025-01-31T14:53:40", "dialogue_partners": pair, "duration": "0:04:22"}))
        (root / version / "results.csv").write_text("game,model\n")
        published[f"{version}/{pair}/{experiment}/episode_{k}"] = scores
    return published


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, dicts key for key (turn keys compared as strings)."""
    if isinstance(a, dict) and isinstance(b, dict):
        a, b = {str(k): v for k, v in a.items()}, {str(k): v for k, v in b.items()}
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("key", list(FIXTURES), ids=[f"{v}-{e}-{k}" for v, _, e, k in FIXTURES])
def test_published_episode_scores_as_clembench_did(tmp_path: Path, key: tuple[str, str, str, int]) -> None:
    published = write_runs(tmp_path)
    version, pair, experiment, k = key
    result = read_results(tmp_path)
    assert result.errors == [] and result.warnings == []
    got = {e.key: e for e in result.episodes}
    ep = got[f"{version}/{pair}/{experiment}/episode_{k}"]
    want = published[ep.key]
    assert list(ep.scores["episode scores"]) == list(want["episode scores"])  # same keys, same order
    assert same(ep.scores["episode scores"], want["episode scores"]), (ep.scores, want)
    assert same(ep.scores["turn scores"], want["turn scores"])
    assert ep.published is not None and same(ep.published, want)


def test_runs_root_version_folder_and_pair_folder(tmp_path: Path) -> None:
    published = write_runs(tmp_path)
    assert sorted(e.key for e in read_results(tmp_path).episodes) == sorted(published)
    v10 = read_results(tmp_path / "v1.0")
    assert v10.errors == []
    assert [(e.model, e.experiment, e.episode) for e in v10.episodes] == [
        ("CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0", "0_travel-booking", 9),
        ("CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0", "4_letter-number", 1)]
    pair = read_results(tmp_path / "v2.0" / "gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0")
    assert [e.key for e in pair.episodes] == ["gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0/0_travel-booking/"
                                              "episode_0"]
    empty = tmp_path / "empty"
    (empty / "v9.9" / "some-pair" / "wordle").mkdir(parents=True)
    assert read_results(empty).errors == [
        f"{empty}: no {GAME} episodes found (expected [<version>/]<model>/{GAME}/<experiment>/episode_<k>/"
        "interactions.json)"]


def test_legacy_reply_still_needs_its_tag(tmp_path: Path) -> None:
    """A continuation is tolerated (old clembench versions recorded it), a wrong tag is not."""
    write_runs(tmp_path)
    path = (tmp_path / "v1.0" / "CodeLlama-34b-Instruct-hf-t0.0--CodeLlama-34b-Instruct-hf-t0.0" / GAME
            / "0_travel-booking" / "episode_9" / "interactions.json")
    d = json.loads(path.read_text())
    d["probes"][0][2]["answer"] = "REPLY: No, not yet.\n\nANSWER: No."
    path.write_text(json.dumps(d))
    result = read_results(tmp_path)
    assert len(result.errors) == 1 and "\n" not in result.errors[0]
    assert result.errors[0].startswith(f"{path}: probes[0][2].answer: reply 'REPLY: No, not yet.\\n\\nANSWER: No.'")
    assert len(result.episodes) == len(FIXTURES) - 1


def test_scores_json_that_differs_is_one_warning_line(tmp_path: Path) -> None:
    write_runs(tmp_path)
    ep = tmp_path / "v2.0" / "gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0" / GAME / "0_travel-booking" / "episode_0"
    scores = json.loads((ep / "scores.json").read_text())
    scores["episode scores"]["Main Score"] = 80.0
    (ep / "scores.json").write_text(json.dumps(scores))
    bad = tmp_path / "v0.9" / "claude-v1.3-t0.0--claude-v1.3-t0.0" / GAME / "1_job-interview" / "episode_4"
    (bad / "scores.json").write_text('{"turn scores": {')
    result = read_results(tmp_path)
    assert result.errors == [] and len(result.episodes) == len(FIXTURES)
    assert result.warnings == [
        f"{bad / 'scores.json'}: unreadable, ignored: Expecting property name enclosed in double quotes: "
        "line 1 column 18 (char 17)",
        f"{ep / 'scores.json'}: differs from pxp's re-scoring: 'Main Score' 80.0 there, 74.99999999999999 re-scored"]
    kept = next(e for e in result.episodes if e.path == ep / "interactions.json")
    assert kept.scores["episode scores"]["Main Score"] == 74.99999999999999


def _clemcore(inter: dict[str, Any], labelled: bool) -> dict[str, Any]:
    """The same record as clemcore's GameInteractionsRecorder writes it (clembench on clemcore): a `meta`
    block, `player_models`, players as {game_role, model_name}, the answerer named "Player 1 (Answerer)"
    and its probe exchanges logged as messages kept out of its dialogue ("(forget)" types, or a label)."""
    kinds = {"probe question": "send message", "probe answer": "get message"}
    turns = []
    for turn in inter["turns"]:
        events = []
        for ev in turn:
            ev = json.loads(json.dumps(ev))
            kind = ev["action"]["type"]
            if kind in kinds:
                ev["action"]["type"] = kinds[kind] if labelled else f"{kinds[kind]} (forget)"
                if labelled:
                    ev["action"]["label"] = "forget"
            for end in ("from", "to"):
                if ev[end] == "Player 1":
                    ev[end] = "Player 1 (Answerer)"
            events.append(ev)
        turns.append(events)
    return {"meta": {"game_name": GAME, "experiment_name": "travel-booking", "game_id": 0,
                     "results_folder": "results", "clem_version": "3.0.0", "round_count": 6, "completed": True},
            "player_models": {"Player 1": {"model_name": "some-model"}},
            **inter, "turns": turns,
            "players": {"GM": {"game_role": "Game Master", "model_name": "programmatic"},
                        "Player 1 (Answerer)": {"game_role": "Answerer", "model_name": "some-model"},
                        "Player 2 (Questioner)": {"game_role": "Questioner", "model_name": "programmatic"}}}


@pytest.mark.parametrize("labelled", [False, True], ids=["forget-types", "forget-labels"])
def test_clemcore_style_record_reads_alike(tmp_path: Path, labelled: bool) -> None:
    inter, scores = v20_played()
    ep = tmp_path / "pair" / GAME / "0_travel-booking" / "episode_0"
    ep.mkdir(parents=True)
    (ep / "interactions.json").write_text(json.dumps(_clemcore(inter, labelled)))
    (ep / "scores.json").write_text(json.dumps(scores))
    result = read_results(tmp_path)
    assert result.errors == [] and result.warnings == []
    [got] = result.episodes
    assert same(got.scores, scores)
    said = [m["content"] for m in got.record.dialogue if m["role"] == "assistant"]
    assert said == ["Ok."] + ["ANSWER: Lisbon."] * 5  # no probe reply in the answerer's dialogue
    # a probe reply recorded as parsed "yes" still needs its ASIDE: tag
    bad = _clemcore(inter, labelled)
    k = next(i for i, e in enumerate(bad["turns"][1]) if e["action"]["content"] == "ASIDE: Yes.")
    bad["turns"][1][k]["action"]["content"] = "MAYBE: Yes."
    (ep / "interactions.json").write_text(json.dumps(bad))
    assert read_results(tmp_path).errors == [
        f"{ep / 'interactions.json'}: turns[1][{k}].action.content: reply 'MAYBE: Yes.' recorded as parsed "
        "but lacks the ANSWER: tag (unknown tag?)"]
