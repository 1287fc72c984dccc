"""A pure episode of the scorekeeping game: the game master's state machine and its record.

Plays one instance against an answerer exactly as clembench's privateshared/master.py (`play`, `turn`,
`probe`, `_probing_loop`) and game.py do, and records the fields clembench's interactions.json holds
(`turns` events, `probes` with `gt`/`answer`/`value`/`tries`, `realised_slots`, the request counts,
`Filled Slots`, `Aborted`, `Played Probe Rounds`), so live and imported episodes score alike.
Probe questions and replies never enter the answerer's dialogue context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping import rules
from pxp.protocols.scorekeeping.instances import Instance

REQUEST_COUNT = "Request Count"
PARSED_REQUEST_COUNT = "Parsed Request Count"
VIOLATED_REQUEST_COUNT = "Violated Request Count"
OK_REPLY = "Ok."
"""clembench game.py `initiate`: a fake assistant turn after the initial prompt."""
DUMMY_PROMPT = "What is the next request?"


@dataclass(frozen=True)
class Request:
    """What the answerer is asked: `messages` is the whole prompt (a probe adds one message at the end)."""

    kind: Literal["answer", "probe"]
    messages: list[dict[str, str]]
    slot: str
    probe_round: int
    attempt: int
    instance: Instance


Answerer = Callable[[Request], str]


class RepliesExhausted(PxpError, RuntimeError):
    """A fixed sequence of replies ran out before the episode ended."""


def replies(seq: Sequence[str]) -> Answerer:
    """An answerer that returns the given replies in order."""
    it: Iterator[str] = iter(seq)

    def answer(request: Request) -> str:
        try:
            return next(it)
        except StopIteration:
            raise RepliesExhausted(f"no reply left for the {request.kind} on {request.slot!r}") from None

    return answer


@dataclass
class Probe:
    """One probe as clembench logs it; answer/value/tries stay None for probes never posed."""

    target: str
    question: str
    gt: int
    answer: str | None = None
    value: int | None = None
    tries: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"target": self.target, "question": self.question, "gt": self.gt}
        if self.value is not None:
            d.update(answer=self.answer, value=self.value, tries=self.tries)
        return d


@dataclass
class EpisodeRecord:
    """The outcome of one episode, field for field what clembench's interactions.json records."""

    probes: list[list[Probe]]
    realised_slots: dict[str, int]
    request_counts: list[int]
    parsed_request_counts: list[int]
    violated_request_counts: list[int]
    filled_slots: list[bool]
    aborted: bool
    played_probe_rounds: int
    turns: list[list[dict[str, Any]]] = field(default_factory=list)
    players: dict[str, str] = field(default_factory=dict)
    dialogue: list[dict[str, str]] = field(default_factory=list)

    def to_interactions(self) -> dict[str, Any]:
        """The interactions.json dict (events carry no timestamps; the writer may add them)."""
        return {
            "players": dict(self.players),
            "turns": [[dict(e) for e in turn] for turn in self.turns],
            "probes": [[p.to_dict() for p in rnd] for rnd in self.probes],
            "realised_slots": dict(self.realised_slots),
            REQUEST_COUNT: list(self.request_counts),
            PARSED_REQUEST_COUNT: list(self.parsed_request_counts),
            VIOLATED_REQUEST_COUNT: list(self.violated_request_counts),
            "Filled Slots": list(self.filled_slots),
            "Aborted": self.aborted,
            "Played Probe Rounds": self.played_probe_rounds,
        }


class _Master:
    def __init__(self, instance: Instance, answerer: Answerer, model: str) -> None:
        self.inst = instance
        self.answerer = answerer
        n = len(instance.slots)
        self.n_rounds = n + 1
        self.messages: list[dict[str, str]] = []
        self.current_turn = 0
        # clembench: probe_gt = {slot: index in request_order}, lowered when a value is anticipated
        self.realised = {slot: i for i, slot in enumerate(instance.request_order)}
        self.requests = [0] * self.n_rounds
        self.parsed = [0] * self.n_rounds
        self.violated = [0] * self.n_rounds
        self.filled: list[bool] = []
        self.aborted = False
        self.played = 0
        self.turns: list[list[dict[str, Any]]] = []
        self.players = {"GM": "Game master for privateshared", "Player 1": f"Answerer: {model}",
                        "Player 2": "Questioner: Programmatic"}

    def log(self, from_: str, to: str, kind: str, content: Any) -> None:
        self.turns[-1].append({"from": from_, "to": to, "action": {"type": kind, "content": content}})

    def play(self) -> EpisodeRecord:
        all_probes = []
        self.turns.append([])
        self.messages = [{"role": "user", "content": self.inst.initial_prompt},
                         {"role": "assistant", "content": OK_REPLY}]
        self.log("GM", "Player 1", "send message", self.inst.initial_prompt)
        probes, ok = self.probe()
        all_probes.append(probes)
        if not ok:
            self.log("GM", "GM", "invalid format", "Abort: invalid format in probing.")
            self.aborted = True
        while self.current_turn < len(self.inst.slots) and not self.aborted:
            self.turns.append([])
            if not self.turn():
                self.log("GM", "GM", "invalid format", "Abort: invalid format in slot filling.")
                self.aborted = True
                break
            probes, ok = self.probe()
            all_probes.append(probes)
            if not ok:
                self.log("GM", "GM", "invalid format", "Abort: invalid format in probing.")
                self.aborted = True
                break
        self.log("GM", "GM", "end", "Game finished.")
        return EpisodeRecord(probes=all_probes, realised_slots=dict(self.realised), request_counts=self.requests,
                             parsed_request_counts=self.parsed, violated_request_counts=self.violated,
                             filled_slots=self.filled, aborted=self.aborted, played_probe_rounds=self.played,
                             turns=self.turns, players=self.players, dialogue=[dict(m) for m in self.messages])

    def turn(self) -> bool:
        slot = self.inst.request_order[self.current_turn]
        question = self.inst.question(slot)
        self.log("GM", "Player 2", "send message", DUMMY_PROMPT)
        self.log("Player 2", "GM", "get message", question)
        # pxp sends the coda-appended request that clembench logs (its game.py appends the bare request)
        message = rules.request_message(self.inst.tag, question)
        self.log("GM", "Player 1", "send message", message)
        self.messages.append({"role": "user", "content": message})
        reply = self.answerer(Request("answer", [dict(m) for m in self.messages], slot, self.current_turn + 1, 1,
                                      self.inst))
        self.messages.append({"role": "assistant", "content": reply})
        self.current_turn += 1
        self.log("Player 1", "GM", "get message", reply)
        # the request is counted with the probing round that follows it (clembench: index current_turn)
        self.requests[self.current_turn] += 1
        parsed = rules.parse_answer(reply)
        self.log("GM", "GM", "parse", rules.INVALID if parsed is None else parsed)
        if parsed is None:
            self.violated[self.current_turn] += 1
            return False
        self.parsed[self.current_turn] += 1
        filled = rules.slot_filled(reply, self.inst.slots[slot])
        self.filled.append(filled)
        self.log("GM", "GM", "metadata", f"Slot filled: {filled}")
        turn = self.current_turn - 1
        before = dict(self.realised)
        for s in rules.update_realised(self.realised, reply, self.inst.slots, turn):
            self.log("GM", "GM", "metadata",
                     f"Value for {s.upper()} anticipated; ground truth turn updated from {before[s]} to {turn}.")
        self.log("GM", "Player 2", "send message", parsed)
        return True

    def probe(self) -> tuple[list[Probe], bool]:
        self.log("GM", "GM", "info", "Begin probing")
        rnd = self.current_turn
        probes = [Probe(target=slot.upper(), question=rules.probe_text(self.inst.probe_question(rnd, slot)),
                        gt=rules.ground_truth(rnd, self.realised[slot])) for slot in self.inst.probes[rnd]]
        ok_all = True
        for slot, probe in zip(self.inst.probes[rnd], probes, strict=True):
            question = self.inst.probe_question(rnd, slot)
            tries, value, reply = 1, None, ""
            while tries <= rules.MAX_PROBE_ATTEMPTS:
                text = rules.probe_prompt(question, tries)
                self.log("GM", "Player 1", "probe question", text)
                context = [dict(m) for m in self.messages] + [{"role": "user", "content": text}]
                reply = self.answerer(Request("probe", context, slot, rnd, tries, self.inst))
                self.log("Player 1", "GM", "probe answer", reply)
                self.requests[rnd] += 1
                value = rules.parse_probe(reply)
                self.log("GM", "GM", "parse", rules.INVALID if value is None else (rules.YES if value else rules.NO))
                if value is not None:
                    self.parsed[rnd] += 1
                    break
                self.violated[rnd] += 1
                tries += 1  # pinned: after 5 invalid attempts clembench records tries = 6
            probe.answer = reply
            probe.value = rules.INVALID_LABEL if value is None else value
            probe.tries = tries
            if value is None:
                self.log("GM", "GM", "metadata", f"Answer for {probe.target} invalid after max attempts.")
            else:
                self.log("GM", "GM", "metadata", f"Answer for {probe.target} valid after {tries} tries.")
            self.log("GM", "GM", "check", "Answer is {}correct.".format("" if probe.value == probe.gt else "in"))
            if value is None:
                ok_all = False
                break
        if ok_all:
            self.played += 1
        self.log("GM", "GM", "info", "End probing")
        return probes, ok_all


def play_episode(instance: Instance, answerer: Answerer | Sequence[str], *, model: str = "unknown") -> EpisodeRecord:
    """Play one episode; `answerer` is a callable taking a Request, or a sequence of replies."""
    call: Answerer = answerer if callable(answerer) else replies(answerer)
    return _Master(instance, call, model).play()


class RecordError(rules.ScorekeepingError):
    """An interactions.json dict is malformed; the message names the field."""


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _counts(data: Mapping[str, Any], key: str) -> list[int]:
    v = data.get(key)
    if v is None:
        raise RecordError(f"{key}: missing")
    if not isinstance(v, list) or not all(_int(x) and x >= 0 for x in v):
        raise RecordError(f"{key}: expected a list of non-negative integers")
    return list(v)


def from_interactions(data: Mapping[str, Any]) -> EpisodeRecord:
    """Validate a loaded interactions.json and turn it into an EpisodeRecord.

    Raises RecordError naming the field: missing keys, wrong types, a played probe without a yes/no
    value, a reply whose tag is not the one its parse requires (e.g. `FOO: yes` recorded as yes).
    """
    if not isinstance(data, Mapping):
        raise RecordError("interactions: expected a JSON object")
    for key in ("probes", "realised_slots", "Filled Slots", "Aborted", "Played Probe Rounds"):
        if key not in data:
            raise RecordError(f"{key}: missing")
    aborted = data["Aborted"]
    if not isinstance(aborted, bool) and aborted not in (0, 1):
        raise RecordError("Aborted: expected true/false")
    played = data["Played Probe Rounds"]
    if not _int(played) or played < 0:
        raise RecordError("Played Probe Rounds: expected a non-negative integer")
    realised = data["realised_slots"]
    if not isinstance(realised, dict) or not all(_int(v) for v in realised.values()):
        raise RecordError("realised_slots: expected {slot: integer}")
    filled = data["Filled Slots"]
    if not isinstance(filled, list) or not all(isinstance(v, bool) or v in (0, 1) for v in filled):
        raise RecordError("Filled Slots: expected a list of booleans")
    counts = [_counts(data, k) for k in (REQUEST_COUNT, PARSED_REQUEST_COUNT, VIOLATED_REQUEST_COUNT)]
    raw = data["probes"]
    if not isinstance(raw, list) or len(raw) < played:
        raise RecordError(f"probes: expected a list of at least {played} probing rounds")
    if any(len(c) < played for c in counts):
        raise RecordError(f"{REQUEST_COUNT}: fewer entries than the {played} played probe rounds")
    if played > 1 and len(filled) < played - 1:
        raise RecordError(f"Filled Slots: {len(filled)} entries for {played} played probe rounds")
    probes = [_probe_round(rnd, r, r < played) for r, rnd in enumerate(raw)]
    turns = data.get("turns", [])
    if not isinstance(turns, list) or not all(isinstance(t, list) for t in turns):
        raise RecordError("turns: expected a list of lists of events")
    _check_turns(turns)
    players = data.get("players", {})
    return EpisodeRecord(probes=probes, realised_slots=dict(realised), request_counts=counts[0],
                         parsed_request_counts=counts[1], violated_request_counts=counts[2],
                         filled_slots=[bool(v) for v in filled], aborted=bool(aborted), played_probe_rounds=played,
                         turns=turns, players=dict(players) if isinstance(players, dict) else {},
                         dialogue=dialogue_from_turns(turns))


def _probe_round(rnd: Any, r: int, played: bool) -> list[Probe]:
    if not isinstance(rnd, list) or (played and not rnd):
        raise RecordError(f"probes[{r}]: expected a non-empty list of probes")
    out = []
    for i, p in enumerate(rnd):
        where = f"probes[{r}][{i}]"
        if not isinstance(p, dict):
            raise RecordError(f"{where}: expected an object")
        if not _int(p.get("gt")) or p["gt"] not in (0, 1):
            raise RecordError(f"{where}.gt: missing or not 0/1")
        value = p.get("value")
        if played and value not in (0, 1):
            raise RecordError(f"{where}.value: a played probe needs 0 or 1, got {value!r}")
        if value is not None and (not _int(value) or value not in (0, 1, rules.INVALID_LABEL)):
            raise RecordError(f"{where}.value: expected 0, 1 or 2, got {value!r}")
        answer: Any = p.get("answer")
        if value is not None and not isinstance(answer, str):
            raise RecordError(f"{where}.answer: missing or not a string")
        if value in (0, 1) and rules.tagged_probe_value(answer) != value:
            raise RecordError(f"{where}.answer: reply {answer[:40]!r} is not a valid "
                              f"'{rules.ASIDE_TAG} {rules.YES if value else rules.NO}' reply (unknown tag?)")
        tries: Any = p.get("tries")
        if value is not None and (not _int(tries) or not 1 <= tries <= rules.MAX_PROBE_ATTEMPTS + 1):
            raise RecordError(f"{where}.tries: expected 1..{rules.MAX_PROBE_ATTEMPTS + 1}, got {tries!r}")
        out.append(Probe(target=str(p.get("target", "")), question=str(p.get("question", "")), gt=p["gt"],
                         answer=answer, value=value, tries=tries))
    return out


def _is_answerer(name: Any) -> bool:
    # clembench logs "Player 1"; clemcore-based versions name the player, e.g. "Player 1 (Answerer)"
    return isinstance(name, str) and (name == "Player 1" or name.startswith("Player 1 "))


def _forgotten(action: Mapping[str, Any]) -> bool:
    """A probe exchange clemcore logs apart from the dialogue ("... (forget)" type or label "forget")."""
    return str(action.get("type", "")).endswith("(forget)") or action.get("label") == "forget"


def _check_turns(turns: list[list[Any]]) -> None:
    """A reply the record parsed as valid must carry its tag: ANSWER: (or ASIDE: for a yes/no probe reply,
    which clemcore-based versions log as a "get message" too)."""
    for t, turn in enumerate(turns):
        for e, event in enumerate(turn):
            if not isinstance(event, dict) or not isinstance(event.get("action"), dict):
                raise RecordError(f"turns[{t}][{e}].action: missing or not an object")
            action = event["action"]
            if not str(action.get("type", "")).startswith("get message") or not _is_answerer(event.get("from")):
                continue
            reply = action.get("content")
            if not isinstance(reply, str):
                raise RecordError(f"turns[{t}][{e}].action.content: expected a string")
            nxt = turn[e + 1] if e + 1 < len(turn) else None
            parsed = nxt.get("action", {}) if isinstance(nxt, dict) else {}
            label = parsed.get("content")
            if parsed.get("type") != "parse" or label == rules.INVALID or rules.tagged_answer(reply):
                continue
            if label in (rules.YES, rules.NO) and rules.tagged_probe_value(reply) == int(label == rules.YES):
                continue
            raise RecordError(f"turns[{t}][{e}].action.content: reply {reply[:40]!r} recorded as parsed "
                              f"but lacks the {rules.ANSWER_TAG} tag (unknown tag?)")


def dialogue_from_turns(turns: Sequence[Sequence[Any]]) -> list[dict[str, str]]:
    """The answerer's dialogue (no probes) rebuilt from the events: GM→Player 1 messages and replies."""
    out: list[dict[str, str]] = []
    for turn in turns:
        for event in turn:
            if not isinstance(event, dict) or not isinstance(event.get("action"), dict):
                continue
            action = event["action"]
            content = action.get("content")
            if not isinstance(content, str):
                continue
            if _forgotten(action):
                continue
            if action.get("type") == "send message" and _is_answerer(event.get("to")):
                out.append({"role": "user", "content": content})
                if len(out) == 1:
                    out.append({"role": "assistant", "content": OK_REPLY})
            elif action.get("type") == "get message" and _is_answerer(event.get("from")):
                out.append({"role": "assistant", "content": content})
    return out
