"""A seeded simulated answerer, so every score path of the scorekeeping game runs offline.

Deterministic from its seed: each reply draws from a random.Random seeded by (seed, game, kind, round,
slot, attempt), so the replies do not depend on call order or on other episodes run concurrently.
It knows the slot values (as the initial prompt tells them) and judges "shared" from its own
previous turns (a slot is shared once asked or once its value was said), as a careful player would.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pxp.protocols.scorekeeping import rules
from pxp.protocols.scorekeeping.episode import Request

WRONG_ANSWER = "I would rather not say."
"""A reply that fills no slot (contains no slot value of the pxp domains)."""


@dataclass(frozen=True)
class SimulatedAnswerer:
    """probe_accuracy: chance a valid probe reply is right; slot_accuracy: chance an answer gives the
    asked value; format_error_rate: chance any reply breaks the format (no tag)."""

    seed: int = 0
    probe_accuracy: float = 1.0
    slot_accuracy: float = 1.0
    format_error_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("probe_accuracy", "slot_accuracy", "format_error_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise rules.ScorekeepingError(f"{name} must be in [0, 1], got {v}")

    def _rng(self, req: Request) -> random.Random:
        key = f"{self.seed}:{req.instance.experiment}:{req.instance.game_id}:{req.kind}:{req.probe_round}:" \
              f"{req.slot}:{req.attempt}"
        return random.Random(key)

    def __call__(self, req: Request) -> str:
        rng = self._rng(req)
        broken = rng.random() < self.format_error_rate
        if req.kind == "answer":
            right = rng.random() < self.slot_accuracy
            text = f"My answer is {req.instance.slots[req.slot]}." if right else WRONG_ANSWER
            return text if broken else f"{rules.ANSWER_TAG} {text}"
        value = req.instance.slots[req.slot].lower()
        # its own answers so far (the first assistant message is the fixed "Ok."): a slot is shared once
        # asked (even if answered wrongly, as the paper says) or once its value was said
        answers = [m["content"].lower() for m in req.messages[2:] if m["role"] == "assistant"]
        asked = req.instance.request_order[: len(answers)]
        said = req.slot in asked or any(value in a for a in answers)
        correct = rng.random() < self.probe_accuracy
        says_yes = said if correct else not said
        word = "Yes" if says_yes else "No"
        return f"I think {word.lower()}." if broken else f"{rules.ASIDE_TAG} {word}."
