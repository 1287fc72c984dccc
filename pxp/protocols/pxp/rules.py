"""The PXP protocol core (DESIGN §1): tags, the AGENT rule, INTERACT's stop rule,
whose turn it is, and the conformance check of a stored session.

Pure: no I/O, no database, no SDK. A session's state is derived from its messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pxp.protocols.errors import PxpError


class ProtocolError(PxpError, ValueError):
    """A step the protocol forbids (a typed rule violation, not a crash)."""


class Tag(StrEnum):
    """Message tags of PXP: INIT plus the four R's."""

    INIT = "INIT"
    RATIFY = "RATIFY"
    REFUTE = "REFUTE"
    REVISE = "REVISE"
    REJECT = "REJECT"

    @classmethod
    def parse(cls, text: str) -> Tag:
        """Read a tag in any case ("ratify", "Ratify", " RATIFY ")."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            raise ProtocolError(f"unknown tag {text!r} (expected one of {', '.join(t.value for t in cls)})") from None


class Sender(StrEnum):
    """The two agents of a session: the machine m and the human h."""

    MACHINE = "machine"
    HUMAN = "human"

    @property
    def other(self) -> Sender:
        return Sender.HUMAN if self is Sender.MACHINE else Sender.MACHINE

    @classmethod
    def parse(cls, text: str) -> Sender:
        t = text.strip().lower()
        if t in ("m", "machine"):
            return cls.MACHINE
        if t in ("h", "human"):
            return cls.HUMAN
        raise ProtocolError(f"unknown sender {text!r} (expected machine or human)")


@dataclass(frozen=True, slots=True)
class Msg:
    """One message of the M table as the protocol sees it."""

    j: int
    sender: Sender
    tag: Tag
    prediction: str = ""
    explanation: str = ""
    match: bool | None = None
    agree: bool | None = None
    changed: bool | None = None


#: the largest message bound n pxp stores and analyses (the papers use n = 10); a larger n is refused
MAX_MESSAGE_BOUND = 1000

#: the tags that disagree, each of which must say why: "in all cases, the complete message has the tag, along
#: with a_n's current prediction and explanation" (PXP-2024 §2; docs/protocol.md, Agents, messages and tags)
REASONED = frozenset({"REFUTE", "REVISE", "REJECT"})


def lacks_reason(tag: str, explanation: str) -> bool:
    """A disagreement (REFUTE, REVISE, REJECT: a Tag or its text, hashed alike) whose explanation is empty: the
    rule `missing_reason` words, for the readers that only need yes or no."""
    return tag in REASONED and not explanation.strip()


def missing_reason(tag: Tag, explanation: str) -> str | None:
    """Why a message cannot be sent as it is (a disagreement with an empty explanation), or None."""
    if lacks_reason(tag, explanation):
        return f"a {tag.value} says why you disagree: its explanation is empty"
    return None


def session_bounds(n: int, k: int) -> list[str]:
    """Why (n, k) cannot bound a session, one line each: a session needs n >= 2 (the machine's
    INIT and one reply), 1 <= k <= n, and n at most MAX_MESSAGE_BOUND."""
    out = []
    if n < 2:
        out.append(f"--n: the message bound n must be at least 2, got {n}")
    elif n > MAX_MESSAGE_BOUND:
        out.append(f"--n: the message bound n must be at most {MAX_MESSAGE_BOUND} (the store's limit), got {n}")
    if k < 1:
        out.append(f"--k: k must be at least 1, got {k}")
    elif k > n >= 2:
        out.append(f"--k: k must be at most the message bound n = {n}, got {k}")
    return out


def agent_tag(j: int, k: int, match: bool, agree: bool, changed: bool) -> Tag:
    """AGENT(λ, j): the tag of message j from the guard outcomes (DESIGN §1).

    match/agree compare the other agent's message j-1 with λ's own message j-2;
    changed says λ's current answer differs from its message j-2. At j = 2 there is
    no earlier own message, so changed must be false (REVISE is impossible there).
    """
    if j < 1:
        raise ProtocolError(f"message numbers start at 1, got {j}")
    if j == 1:
        return Tag.INIT
    if j == 2 and changed:
        raise ProtocolError("at message 2 there is no earlier answer, so nothing can change")
    if match and agree:
        return Tag.RATIFY
    if match or agree:
        return Tag.REVISE if changed else Tag.REFUTE
    if j > k:
        return Tag.REJECT
    return Tag.REVISE if changed else Tag.REFUTE


def tag_reason(j: int, k: int, match: bool, agree: bool, changed: bool) -> str:
    """A plain-English reason for the tag agent_tag gives (shown live in the app)."""
    tag = agent_tag(j, k, match, agree, changed)
    if tag is Tag.INIT:
        return "the first message of a session is INIT"
    if tag is Tag.RATIFY:
        return "the prediction matches and the explanation agrees"
    what = (
        "the explanation does not agree"
        if match and not agree
        else "the prediction does not match"
        if agree and not match
        else "neither the prediction nor the explanation agrees"
    )
    if tag is Tag.REJECT:
        return f"{what}, and message {j} is past k = {k}"
    if tag is Tag.REVISE:
        return f"{what}, and the answer was revised"
    suffix = f" (REJECT only after message {k})" if not (match or agree) else ""
    return f"{what}, and the answer was kept{suffix}"


def check_tag(tag: Tag, j: int, k: int, match: bool, agree: bool, changed: bool) -> str | None:
    """Why `tag` is forbidden for these facts, or None when the AGENT rule gives it."""
    try:
        expected = agent_tag(j, k, match, agree, changed)
    except ProtocolError as err:
        return str(err)
    if tag is expected:
        return None
    if tag is Tag.INIT:
        return "INIT is only for message 1"
    if j == 1:
        return "message 1 must be INIT"
    if tag is Tag.REVISE and j == 2:
        return "REVISE is impossible at message 2: there is no earlier answer to revise"
    if tag is Tag.REVISE and not changed:
        return "REVISE needs a changed answer; the answer was not edited"
    if tag is Tag.REJECT and j <= k:
        return f"REJECT is only allowed after message {k} (this is message {j})"
    if tag is Tag.REJECT:
        return "REJECT needs both the prediction and the explanation to disagree"
    if tag is Tag.RATIFY:
        return "RATIFY needs the prediction to match and the explanation to agree"
    if tag is Tag.REFUTE and changed:
        return "REFUTE keeps the answer; the answer was edited, so this is a REVISE"
    if tag is Tag.REFUTE:
        return "REFUTE needs a disagreement; the prediction matches and the explanation agrees"
    return f"the AGENT rule gives {expected.value} here, not {tag.value}"


def implied_facts(
    tag: Tag, j: int, k: int, *, match: bool | None = None, agree: bool | None = None
) -> tuple[bool, bool, bool]:
    """The (match, agree, changed) a directly chosen tag implies (DESIGN §1, the chemist).

    Hints that are consistent with the tag are kept; otherwise the weakest facts that
    produce the tag are recorded. Raises ProtocolError when no facts allow the tag.
    """
    changed = tag is Tag.REVISE
    candidates: list[tuple[bool, bool]]
    if tag is Tag.RATIFY:
        candidates = [(True, True)]
    elif tag is Tag.REJECT or tag is Tag.INIT:
        candidates = [(False, False)]
    else:
        candidates = [(True, False), (False, True), (False, False)]
    # facts already known (both, or one of them) come first, so a computed match is kept
    candidates.sort(key=lambda c: (match is not None and c[0] != match) + (agree is not None and c[1] != agree))
    reasons = []
    for m, a in candidates:
        reason = check_tag(tag, j, k, m, a, changed)
        if reason is None:
            return m, a, changed
        reasons.append(reason)
    raise ProtocolError(reasons[0])


def stop_reason(messages: Sequence[Msg], n: int) -> str | None:
    """INTERACT's stop rule after the latest message, or None to continue.

    Stops when the latest machine tag and the latest human tag are both RATIFY, when
    the message just sent is REJECT, or when j = n.
    """
    if not messages:
        return None
    last = messages[-1]
    latest: dict[Sender, Tag] = {}
    for m in messages:
        latest[m.sender] = m.tag
    if latest.get(Sender.MACHINE) is Tag.RATIFY and latest.get(Sender.HUMAN) is Tag.RATIFY:
        return "ratified"
    if last.tag is Tag.REJECT:
        return "rejected"
    if last.j >= n:
        return "bound"
    return None


def next_sender(messages: Sequence[Msg], n: int) -> Sender | None:
    """Whose turn it is: the machine opens, then the agents alternate; None once stopped."""
    if not messages:
        return Sender.MACHINE
    if stop_reason(messages, n) is not None:
        return None
    return messages[-1].sender.other


@dataclass(frozen=True, slots=True)
class Violation:
    """One departure of a stored session from DESIGN §1."""

    j: int | None
    reason: str

    def __str__(self) -> str:
        return f"message {self.j}: {self.reason}" if self.j is not None else self.reason


def conformance(messages: Sequence[Msg], n: int, k: int, *, status: str = "finished") -> list[Violation]:
    """Every violation of DESIGN §1 in a stored session, with its message number.

    `status` is the session's stored status: "finished" must end on a stop condition,
    "open" must not be stopped, "aborted" may end anywhere before a stop.
    """
    out: list[Violation] = []
    if n < 1:
        out.append(Violation(None, f"the message bound n must be at least 1, got {n}"))
    if k < 1:
        out.append(Violation(None, f"k must be at least 1, got {k}"))
    for i, m in enumerate(messages):
        expected_j = i + 1
        if m.j != expected_j:
            out.append(Violation(m.j, f"message numbers must run 1, 2, 3, ...; expected {expected_j}"))
        expected_sender = Sender.MACHINE if i % 2 == 0 else Sender.HUMAN
        if m.sender is not expected_sender:
            out.append(
                Violation(
                    m.j,
                    f"sent by the {m.sender.value}, but senders alternate starting with "
                    f"the machine, so this one is the {expected_sender.value}'s",
                )
            )
        if i == 0 and m.tag is not Tag.INIT:
            out.append(Violation(m.j, f"message 1 must be INIT, not {m.tag.value}"))
        if i > 0 and m.tag is Tag.INIT:
            out.append(Violation(m.j, "only message 1 may be INIT"))
        if m.tag is Tag.REJECT and m.j <= k:
            out.append(Violation(m.j, f"REJECT is only allowed after message k = {k}"))
        if m.tag is Tag.REVISE and m.j == 2:
            out.append(Violation(m.j, "REVISE is impossible at message 2"))
        if (why := missing_reason(m.tag, m.explanation)) is not None:
            out.append(Violation(m.j, why))
        if i > 0 and m.tag is not Tag.INIT and None not in (m.match, m.agree, m.changed):
            match, agree, changed = bool(m.match), bool(m.agree), bool(m.changed)
            if m.j == 2 and changed:
                out.append(Violation(m.j, "changed is true at message 2, where nothing can change"))
            elif m.j >= 2:
                expected = agent_tag(m.j, k, match, agree, changed)
                structural = (m.tag is Tag.REJECT and m.j <= k) or (m.tag is Tag.REVISE and m.j == 2)
                if m.tag is not expected and not structural:
                    out.append(
                        Violation(
                            m.j,
                            f"tagged {m.tag.value} but its stored facts (match={match}, "
                            f"agree={agree}, changed={changed}) give {expected.value}",
                        )
                    )
        if i > 0 and m.j > n:
            out.append(Violation(m.j, f"sent after the message bound n = {n}"))
        if i > 0 and stop_reason(messages[:i], n) is not None and not (m.j > n):
            why = stop_reason(messages[:i], n)
            out.append(Violation(m.j, f"sent after the session had stopped ({why} at message {i})"))
    if status == "finished":
        if not messages:
            out.append(Violation(None, "a finished session has no messages"))
        elif stop_reason(messages, n) is None:
            out.append(
                Violation(
                    messages[-1].j,
                    "the session is marked finished but no stop condition holds "
                    "(no double RATIFY, no REJECT, and n not reached)",
                )
            )
    elif status == "open" and messages and stop_reason(messages, n) is not None:
        out.append(Violation(messages[-1].j, "the session has stopped but is still marked open"))
    elif status == "aborted" and messages and (why := stop_reason(messages, n)) is not None:
        out.append(Violation(
            messages[-1].j,
            f"the session stopped ({why} at message {messages[-1].j}) but is marked aborted; "
            "a session is aborted only before its stop",
        ))
    return out
