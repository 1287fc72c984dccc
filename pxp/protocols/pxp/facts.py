"""Facts the content decides (DESIGN §1, "The human in the browser" and "Conformance").

`match` and `changed` are computed from the stored predictions and explanations wherever
MATCH is exact (RAD labels, DRUG SMILES sets); only `agree` is left to judgment. A human's
`match` is MATCH over the machine's message j-1 and the human's own message j (what the
expert answers with); the machine's is MATCH over the human's message j-1 and the
machine's own message j-2 (the AGENT rule as the engine computes it). Both agree whenever
the answer is unchanged, because an unchanged message carries message j-2 verbatim.

Pure: MATCH comes in as a function that returns None when a prediction does not parse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pxp.protocols.pxp.rules import (
    Msg,
    ProtocolError,
    Sender,
    Tag,
    Violation,
    agent_tag,
    conformance,
    lacks_reason,
)

#: MATCH over two predictions; None when one of them does not parse (nothing is decided)
MatchFn = Callable[[str, str], bool | None]


def remembered(match: MatchFn | None, chars: int) -> MatchFn | None:
    """`match` (a task's MATCH, pure) answering a pair it has seen from memory: a study's sessions repeat the same
    labels (a DRUG study the same SMILES, each an RDKit parse). Forgets them all past `chars` characters."""
    if match is None:
        return None
    seen: dict[tuple[str, str], bool | None] = {}
    size = 0

    def answer(a: str, b: str) -> bool | None:
        nonlocal size
        key = (a, b)
        if key in seen:
            return seen[key]
        if size > chars:
            seen.clear()
            size = 0
        got = seen[key] = match(a, b)
        size += len(a) + len(b)
        return got

    return answer


def fold(text: str) -> str:
    """Text with its spacing folded (how two explanations are compared for `changed`)."""
    return " ".join(text.split())


def same_folded(a: str, b: str) -> bool:
    """fold(a) == fold(b), folding neither when both are folded already (printable, with one space between words
    and none at either end, as most explanations are): a printable text's only white space is U+0020."""
    if a == b:
        return True
    if _folded(a) and _folded(b):
        return False
    return a.split() == b.split()


def _folded(text: str) -> bool:
    return text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " "


def same_answer(p1: str, e1: str, p2: str, e2: str, match: MatchFn | None) -> bool:
    """Whether two answers are the same: predictions by MATCH (by text when one does not
    parse), explanations by their text with spacing folded."""
    same = match(p1, p2) if match is not None else None
    if same is None:
        same = same_folded(p1, p2)
    return same and same_folded(e1, e2)


@dataclass(frozen=True, slots=True)
class ContentFacts:
    """The facts of message j that its content decides (None: not decided by content)."""

    match: bool | None
    changed: bool
    #: the two predictions MATCH compared: (this agent's, the other agent's)
    compared: tuple[str, str] = ("", "")


def content_facts(
    history: Sequence[Msg], sender: Sender, prediction: str, explanation: str, match: MatchFn | None,
) -> ContentFacts:
    """The match and changed facts of the message after `history` with this content.

    `match` is None when the task's MATCH is not exact (then only `changed` is decided).
    """
    j = len(history) + 1
    if j == 1:
        return ContentFacts(None, False)
    other = history[-1]
    own = history[-2] if len(history) >= 2 else None
    mine = prediction if sender is Sender.HUMAN or own is None else own.prediction
    m = match(other.prediction, mine) if match is not None else None
    changed = own is not None and j > 2 and not same_answer(
        prediction, explanation, own.prediction, own.explanation, match)
    return ContentFacts(m, changed, (mine, other.prediction))


def tag_agree(tag: Tag, j: int, k: int, match: bool, changed: bool, agree: bool | None = None) -> bool | None:
    """The `agree` that makes the AGENT rule give `tag` with these facts, or None when none does.

    A given `agree` (the expert's judgment) is kept if it fits; otherwise False is preferred
    (a tag other than RATIFY usually reports a disagreement), then True.
    """
    for a in ((agree,) if agree is not None else (False, True)):
        try:
            if agent_tag(j, k, match, a, changed) is tag:
                return a
        except ProtocolError:
            return None
    return None


def short(text: str, limit: int = 60) -> str:
    """A prediction as quoted in a one-line message (long ones cut with an ellipsis)."""
    t = fold(text) or "(empty)"
    return t if len(t) <= limit else t[: limit - 1] + "…"


def content_refusal(
    tag: Tag, j: int, k: int, facts: ContentFacts, *, agree: bool | None = None, noun: str = "prediction",
) -> str | None:
    """Why the expert's chosen `tag` contradicts the facts the content decides, or None.

    Worded for the human in the browser: "RATIFY needs your reactants to match the
    machine's: you have CCO, it has CC(=O)O".
    """
    if facts.match is None or tag is Tag.INIT or j < 2:
        return None
    if tag_agree(tag, j, k, facts.match, facts.changed, agree) is not None:
        return None
    mine, theirs = (short(p) for p in facts.compared)
    if tag_agree(tag, j, k, not facts.match, facts.changed, agree) is None:
        return None  # not a question of match: the AGENT rule's own reasons apply
    if facts.match:
        return (f"{tag.value} needs your {noun} to differ from the machine's, "
                f"but you both have {mine}")
    return f"{tag.value} needs your {noun} to match the machine's: you have {mine}, it has {theirs}"


def content_violations(msgs: Sequence[Msg], k: int, match: MatchFn | None) -> list[tuple[int, str]]:
    """(j, reason) for each message whose stored match or changed contradicts its content,
    or whose tag no `agree` can give with the facts its content decides (DESIGN §1,
    Conformance: "where MATCH is exact")."""
    out: list[tuple[int, str]] = []
    for i, m in enumerate(msgs):
        if i == 0 or m.tag is Tag.INIT or m.j < 2:
            continue
        facts = content_facts(msgs[:i], m.sender, m.prediction, m.explanation, match)
        bad = False
        if facts.match is not None and m.match is not None and m.match != facts.match:
            mine, theirs = (short(p) for p in facts.compared)
            out.append((m.j, f"stored match={m.match} but MATCH over its predictions gives "
                             f"{facts.match} (the {m.sender.value}'s {mine}, the "
                             f"{m.sender.other.value}'s {theirs})"))
            bad = True
        if m.j > 2 and m.changed is not None and m.changed != facts.changed:
            how = "differs from" if facts.changed else "is the same as"
            out.append((m.j, f"stored changed={m.changed} but its answer {how} message {m.j - 2}'s"))
            bad = True
        if bad or None not in (m.match, m.agree, m.changed):
            continue  # stored facts that fit the content: conformance checks the tag against them
        if (m.j <= 2 and m.tag is Tag.REVISE) or (m.tag is Tag.REJECT and m.j <= k):
            continue  # the structural rules of conformance name those
        if (why := tag_contradiction(m.tag, m.j, k, facts, m.sender, match=m.match, agree=m.agree)) is not None:
            out.append((m.j, why))
    return out


def tag_contradiction(
    tag: Tag, j: int, k: int, facts: ContentFacts, sender: Sender, *,
    match: bool | None = None, agree: bool | None = None,
) -> str | None:
    """Why no facts allowed by the content give `tag` (one line naming the difference), or None.

    `match` stands in when the content does not decide it (MATCH not exact); `agree` is the
    judgment when known. The structural rules (REVISE at message 2, REJECT while j <= k) are
    conformance's to name.
    """
    if tag is Tag.INIT or j < 2 or (j == 2 and tag is Tag.REVISE) or (tag is Tag.REJECT and j <= k):
        return None
    decided = facts.match if facts.match is not None else match
    matches = [decided] if decided is not None else [True, False]
    if any(tag_agree(tag, j, k, x, facts.changed, agree) is not None for x in matches):
        return None
    who, other = sender.value, sender.other.value
    mine, theirs = (short(p) for p in facts.compared)
    if tag is Tag.REVISE and not facts.changed:
        return f"tagged REVISE but the {who}'s answer is the same as its message {j - 2}"
    if tag is Tag.REFUTE and facts.changed:
        return f"tagged REFUTE but the {who}'s answer differs from its message {j - 2} (a change is a REVISE)"
    if tag is Tag.RATIFY and decided is False and facts.match is not None:
        return f"tagged RATIFY but the predictions differ (the {who}'s {mine}, the {other}'s {theirs})"
    if tag is Tag.REJECT and decided is True and facts.match is not None:
        return f"tagged REJECT but the predictions match (both {mine})"
    shown = f"match={decided}, " if decided is not None else ""
    judged = f", agree={agree}" if agree is not None else ""
    return f"tagged {tag.value} but its content gives {shown}changed={facts.changed}{judged}"


def conformance_with_content(
    msgs: Sequence[Msg], n: int, k: int, *, status: str = "finished", match: MatchFn | None = None,
) -> list[Violation]:
    """conformance (the structural rules and the stored facts against the tags) plus the
    facts the content decides (content_violations), in message order."""
    out = conformance(msgs, n, k, status=status)
    seen = {(v.j, v.reason) for v in out}
    extra = [Violation(j, r) for j, r in content_violations(msgs, k, match) if (j, r) not in seen]
    return sorted([*out, *extra], key=lambda v: -1 if v.j is None else v.j)


#: a stored message as read: (j, sender, tag, prediction, explanation, match, agree, changed), sender and tag as text
Row = tuple[int, str, str, str, str, bool | None, bool | None, bool | None]


def conformance_key(rows: Sequence[Row], n: int, k: int, status: str, match: MatchFn | None) -> tuple[Any, ...]:
    """What decides whether `conformance_with_content` finds nothing in a session: its bounds and status, and each
    message's number, sender, tag, stored facts, whether a disagreement gives no reason, and the match and changed
    its content decides (content_facts). Two sessions with equal keys both conform or neither does, so one that
    conformed vouches for the other; the content itself (the predictions quoted in a violation) is not in the key.
    Item 3 + i is message i's (j, sender, tag, match, agree, changed, no reason, content's match, content's
    changed)."""
    out: list[object] = [n, k, status]
    for i, (j, sender, tag, pred, expl, m, a, c) in enumerate(rows):
        fm: bool | None = None
        fc = False
        if i:  # content_facts of message i + 1 over the i before it
            mine = pred
            if i >= 2:
                own = rows[i - 2]
                if sender != Sender.HUMAN:
                    mine = own[3]
                same = match(pred, own[3]) if match is not None else None
                if same is None:
                    same = same_folded(pred, own[3])
                fc = not (same and same_folded(expl, own[4]))
            fm = match(rows[i - 1][3], mine) if match is not None else None
        out.append((j, sender, tag, m, a, c, lacks_reason(tag, expl), fm, fc))
    return tuple(out)


V = TypeVar("V")


class Vouched(Generic[V]):
    """Conformance keys of sessions found to conform, each with what was worked out for it (e.g. why it stopped),
    at most `messages` messages' worth: forgotten all at once when full, so memory stays bounded."""

    def __init__(self, messages: int) -> None:
        self.limit, self.size = messages, 0
        self.known: dict[tuple[Any, ...], V] = {}

    def get(self, key: tuple[Any, ...]) -> V | None:
        return self.known.get(key)

    def put(self, key: tuple[Any, ...], value: V) -> None:
        size = len(key)
        if self.size + size > self.limit:
            self.known.clear()
            self.size = 0
            if size > self.limit:
                return
        self.known[key] = value
        self.size += size
