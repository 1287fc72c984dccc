"""A fixed travel instance and scripted answerers for hand-computed scorekeeping episodes."""

from __future__ import annotations

from collections.abc import Callable

from pxp.protocols.scorekeeping.episode import Request
from pxp.protocols.scorekeeping.instances import TRAVEL, Instance, initial_prompt

SLOTS = {"from": "Lisbon", "to": "Reykjavik", "by": "train", "class": "economy", "when": "next Tuesday"}
ORDER = ["to", "from", "by", "class", "when"]  # disclosed in turns 0..4
PROBE_ORDER = ["from", "to", "by", "class", "when"]


def instance() -> Instance:
    return Instance(game_id=0, experiment="travel-booking", tag=TRAVEL.tag, slots=dict(SLOTS),
                    request_order=list(ORDER), requests={s: 0 for s in SLOTS},
                    probes={r: {s: 0 for s in PROBE_ORDER} for r in range(6)},
                    initial_prompt=initial_prompt(TRAVEL, SLOTS))


def truthful(probe_round: int, slot: str) -> bool:
    """Shared iff asked in an earlier turn (no anticipation)."""
    return probe_round > ORDER.index(slot)


class Scripted:
    """Answers the questioner with `answers[turn]` (default: the right value) and probes with `probe(round, slot)`;
    `probe` may return a string to reply verbatim. Records every Request."""

    def __init__(self, probe: Callable[[int, str], bool | str] = truthful,
                 answers: dict[int, str] | None = None) -> None:
        self.probe = probe
        self.answers = answers or {}
        self.requests: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.requests.append(req)
        if req.kind == "answer":
            turn = req.probe_round - 1
            return self.answers.get(turn, f"ANSWER: {SLOTS[req.slot]}.")
        out = self.probe(req.probe_round, req.slot)
        if isinstance(out, str):
            return out
        return "ASIDE: Yes." if out else "ASIDE: no"
