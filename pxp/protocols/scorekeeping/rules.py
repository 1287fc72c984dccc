"""Rules of the scorekeeping game ("private and shared", clembench's `privateshared`).

Each rule follows clembench's reference game master (clp-research/clembench, privateshared/master.py,
game.py, constants.py, resources/en_words.json and resources/texts/reprompts.json); where pxp pins a
clembench detail, the comment says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pxp.protocols.errors import PxpError


class ScorekeepingError(PxpError, ValueError):
    """Input the scorekeeping game cannot use (a bad setting, instance or record); one line."""

N_SLOTS = 5
"""Slots per instance (paper: n = 5)."""
N_PROBE_ROUNDS = N_SLOTS + 1
"""Probing round 0 before the first question, one more after each answer."""
MAX_PROBE_ATTEMPTS = 5
"""clembench: `while tries <= len(self.retries)` over the 5 reprompt suffixes."""

ANSWER_TAG = "ANSWER:"
ASIDE_TAG = "ASIDE:"
ME_TAG = "ME:"
YES = "yes"
NO = "no"

INVALID = "NA"
"""clembench constants.INVALID: the parse result of an invalid reply."""
INVALID_LABEL = 2
"""clembench constants.INVALID_LABEL: a probe's `value` after 5 invalid attempts."""

REPHRASINGS: tuple[str, ...] = (
    "",
    "Please answer this question carefully.",
    "Please keep to the instructions.",
    "Please be precise now.",
    "Please think about it once more.",
)
"""Prefix put after `ME:` on attempt 1..5 of a probe (pxp's wording; clembench's has the same shape)."""

PROBE_TEMPLATE = "ME: {} Answer this question with yes or no and then stop."
CODA_TEMPLATE = "{} Answer only this question in one short sentence and then stop."

assert len(REPHRASINGS) == MAX_PROBE_ATTEMPTS


def has_continuation(reply: str) -> bool:
    """True if the reply goes on after a line break once trailing/leading newlines are stripped.

    clembench `_has_continuation`: `'\\n' in response.strip('\\n')` (only newlines are stripped).
    """
    return "\n" in reply.strip("\n")


def _filter_tag(reply: str, tag: str) -> str:
    # clembench `_filter_tag`: removes *every* occurrence of the tag, then strips whitespace
    return reply.replace(tag, "").strip()


def parse_answer(reply: str) -> str | None:
    """The answer to the questioner without its tag, or None if the reply is invalid.

    Valid iff it starts with `ANSWER:` (case-sensitive `startswith`, as clembench) and has no
    continuation after a line break.
    """
    if not reply.startswith(ANSWER_TAG) or has_continuation(reply):
        return None
    return _filter_tag(reply, ANSWER_TAG)


def parse_probe(reply: str) -> int | None:
    """1 for yes, 0 for no, None for an invalid probe reply.

    Valid iff it starts with `ASIDE:`, has no continuation, and after removing the tag starts with
    "yes" or "no" case-insensitively (clembench checks yes first, so "yesno" is yes; "not" is no,
    as its plain `startswith` prefix test gives).
    """
    if not reply.startswith(ASIDE_TAG) or has_continuation(reply):
        return None
    return _yes_no(reply)


def answer_problem(reply: str) -> str | None:
    """Which rule an answer to the questioner breaks (the reason `parse_answer` refuses it), or None."""
    if not reply.startswith(ANSWER_TAG):
        return f"it does not start with {ANSWER_TAG}"
    if has_continuation(reply):
        return "it goes on after a line break"
    return None


def probe_problem(reply: str) -> str | None:
    """Which rule a reply to a private question breaks (the reason `parse_probe` refuses it), or None."""
    if not reply.startswith(ASIDE_TAG):
        return f"it does not start with {ASIDE_TAG}"
    if has_continuation(reply):
        return "it goes on after a line break"
    if _yes_no(reply) is None:
        return f"after {ASIDE_TAG} it does not start with {YES} or {NO}"
    return None


def tagged_probe_value(reply: str) -> int | None:
    """1/0 if the reply carries the `ASIDE:` tag and then yes/no, continuation allowed; else None.

    What any published clembench version could have recorded as a valid probe: the v1.0 runs
    (clembench-runs v1.0/.../privateshared) record e.g. "ASIDE: No, ...\\n\\nANSWER: No." as "no",
    which `parse_probe` (the current rule, no continuation) rejects. Used to check imported records only.
    """
    text = reply.lstrip()
    return _yes_no(text) if text.startswith(ASIDE_TAG) else None


def _yes_no(reply: str) -> int | None:
    """1/0 for a reply whose text after the `ASIDE:` tag starts with yes/no, else None."""
    clean = _filter_tag(reply, ASIDE_TAG).lower()
    if clean.startswith(YES):
        return 1
    if clean.startswith(NO):
        return 0
    return None


def tagged_answer(reply: str) -> bool:
    """True if the reply carries the `ANSWER:` tag (continuation allowed, as old clembench versions parsed)."""
    return reply.lstrip().startswith(ANSWER_TAG)


def probe_text(question: str) -> str:
    """The probe as posed on attempt 1 before the rephrasing is inserted."""
    return PROBE_TEMPLATE.format(question)


def probe_prompt(question: str, attempt: int) -> str:
    """The probe message for attempt 1..5.

    Pinned clembench detail (`_get_probe_content`): `ME: ` is replaced by `ME: <prefix> `, so the
    first attempt (empty prefix) reads `ME:  question` with two spaces.
    """
    if not 1 <= attempt <= MAX_PROBE_ATTEMPTS:
        raise ScorekeepingError(f"attempt must be 1..{MAX_PROBE_ATTEMPTS}, not {attempt}")
    me = ME_TAG + " "
    return probe_text(question).replace(me, f"{me}{REPHRASINGS[attempt - 1]} ")


def request_message(tag: str, question: str) -> str:
    """The questioner's request as the answerer receives it: `TAG: question` plus the coda."""
    return CODA_TEMPLATE.format(f"{tag}: {question}")


def slot_filled(answer: str, value: str) -> bool:
    """clembench `_is_slot_filled`: the value is a case-insensitive substring of the raw answer."""
    return value.lower() in answer.lower()


def disclosed_slots(answer: str, slots: Mapping[str, str]) -> list[str]:
    """Slots whose value the answer contains (case-insensitive substring), in slot order."""
    low = answer.lower()
    return [slot for slot, value in slots.items() if value.lower() in low]


def update_realised(realised: dict[str, int], answer: str, slots: Mapping[str, str], turn: int) -> list[str]:
    """Anticipated slots: a slot whose value appears in the answer of 0-based turn `turn` is shared from then.

    clembench `_update_anticipated_slots`: `probe_gt[slot] = turn` when `turn < probe_gt[slot]`.
    Returns the slots that were updated (in slot order).
    """
    updated = []
    for slot in disclosed_slots(answer, slots):
        if turn < realised[slot]:
            realised[slot] = turn
            updated.append(slot)
    return updated


def ground_truth(probe_round: int, disclosed_turn: int) -> int:
    """1 (shared) iff the probing round comes after the 0-based turn in which the slot was disclosed."""
    return 1 if probe_round > disclosed_turn else 0


def overlapping_values(values: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs (a, b) of values of *different* slots where a is contained in b (case-insensitive).

    `values` holds (slot, value) pairs; an empty list means slot filling is unambiguous
    (clembench's `checkvalues.py` check).
    """
    items = list(values)
    bad = []
    for slot_a, a in items:
        for slot_b, b in items:
            if slot_a != slot_b and a.lower() in b.lower():
                bad.append((a, b))
    return bad
