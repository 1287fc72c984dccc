"""The common-ground probe inside PXP sessions (docs/research.md, Common-ground probe; "Beyond the paper").

After each human message the machine is asked, privately and outside its dialogue context,
yes/no questions whose truth the stored session decides, as the scorekeeping game probes
private/shared status after each turn (Madureira & Schlangen 2022; clembench `privateshared`).
Here the truth is the human's stance towards the machine's current answer (message j-1):

- `accept_prediction`: does the human accept your current prediction?  the human's stored
  MATCH fact at j (RATIFY implies it, REJECT denies it when the fact is missing);
- `accept_explanation`: does the human accept your explanation?  the human's AGREE fact;
- `proposed_other`: has the human proposed a different prediction?  the human's message
  carries a prediction that does not match the machine's: `not match` when the human kept
  their answer (`changed` false, so it carries the answer MATCH was computed on), else
  MATCH(human's prediction, machine's prediction).

Scores per session follow the scorekeeping game: accuracy over every probe (an invalid
reply counts as wrong) and Cohen's κ over the valid ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pxp.protocols.pxp.intelligibility import cohen_kappa
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, Tag

QUESTIONS: dict[str, str] = {
    "accept_prediction": "Does {who} accept your current prediction?",
    "accept_explanation": "Does {who} accept your current explanation?",
    "proposed_other": "Has {who} proposed a prediction different from yours?",
}
"""The probe questions by key (the key is what is stored)."""

Matcher = Callable[[str, str], bool]


def normalised_equal(y1: str, y2: str) -> bool:
    """The default MATCH for `proposed_other`: equality after case folding and whitespace collapsing."""
    return " ".join(y1.split()).casefold() == " ".join(y2.split()).casefold()


def question_text(key: str, who: str = "the human") -> str:
    """The question for `key`, naming the other agent (e.g. "the radiologist")."""
    return QUESTIONS[key].format(who=who)


def _pair(history: Sequence[Msg], j: int) -> tuple[Msg, Msg] | None:
    """(machine message j-1, human message j), or None when j is not a human reply."""
    if j < 2 or len(history) < j:
        return None
    human, machine = history[j - 1], history[j - 2]
    if human.sender is not Sender.HUMAN or machine.sender is not Sender.MACHINE:
        return None
    return machine, human


def _fact(value: bool | None, tag: Tag) -> bool | None:
    if value is not None:
        return value
    if tag is Tag.RATIFY:
        return True
    if tag is Tag.REJECT:
        return False
    return None


def truth(key: str, history: Sequence[Msg], j: int, match: Matcher = normalised_equal) -> bool | None:
    """The truth of probe `key` after human message j of `history` (messages 1..≥j), or None if undecided."""
    pair = _pair(history, j)
    if pair is None:
        return None
    machine, human = pair
    if key == "accept_prediction":
        return _fact(human.match, human.tag)
    if key == "accept_explanation":
        return _fact(human.agree, human.tag)
    if key == "proposed_other":
        if human.changed is False and human.match is not None:
            return not human.match
        return not match(human.prediction, machine.prediction)
    raise ProtocolError(f"unknown common-ground question {key!r}")


def truths(history: Sequence[Msg], j: int, match: Matcher = normalised_equal) -> dict[str, bool]:
    """Every decidable probe after human message j, by key (empty when j is not a human message)."""
    out: dict[str, bool] = {}
    for key in QUESTIONS:
        t = truth(key, history, j, match)
        if t is not None:
            out[key] = t
    return out


def human_turns(history: Sequence[Msg]) -> list[int]:
    """The message numbers j after which the machine is probed (every human message)."""
    return [m.j for m in history if m.sender is Sender.HUMAN and m.j >= 2]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One stored probe: its truth, the machine's answer (None when invalid) and validity."""

    j: int
    question: str
    truth: bool
    answer: bool | None
    valid: bool

    @property
    def correct(self) -> bool:
        return self.valid and self.answer is self.truth


@dataclass(frozen=True, slots=True)
class ProbeScore:
    """A session's probe scores: accuracy (invalid = wrong), κ over valid answers (None if undefined)."""

    probes: int
    valid: int
    correct: int
    accuracy: float | None
    kappa: float | None


def score(probes: Iterable[ProbeResult]) -> ProbeScore:
    """Accuracy and Cohen's κ of one session's probes (the scorekeeping game's episode scores)."""
    ps = list(probes)
    valid = [p for p in ps if p.valid and p.answer is not None]
    correct = sum(p.correct for p in ps)
    pairs = [("yes" if p.truth else "no", "yes" if p.answer else "no") for p in valid]
    return ProbeScore(
        probes=len(ps),
        valid=len(valid),
        correct=correct,
        accuracy=correct / len(ps) if ps else None,
        kappa=cohen_kappa(pairs),
    )
