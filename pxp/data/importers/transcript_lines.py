"""One transcript line, checked field by field, and the facts its content decides (DESIGN §1, §6).

Typed values are checked, never turned into text: `j` and `repetition` are whole numbers,
`prediction` and `explanation` are strings, `match`/`agree`/`changed` are true, false or
null. A line's `match` and `changed` are computed from the content (pxp.protocols.pxp.facts);
the file's own columns, if given, must say the same. Each problem is one line naming the
file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pxp.data.chem import InvalidSmiles, smiles_set, smiles_size_problem
from pxp.data.importers.jsonl import json_kind
from pxp.data.importers.limits import MAX_TEXT_CHARS
from pxp.data.match import normalise_label
from pxp.protocols.pxp.facts import MatchFn, Row, content_facts, short, tag_contradiction
from pxp.protocols.pxp.rules import Msg, Tag
from pxp.protocols.text import TextRefused, clean_name, clean_text

#: the text fields of a line that are short values (the text rule's names); the others are free text
NAMES = frozenset({"sender", "tag", "status", "prediction"})
#: short values the text rule has passed, as it left them: a file repeats its senders, tags, labels, instances and
#: session names from line to line (bounded: emptied when full; only values of at most 200 characters)
PASSED: dict[str, str] = {}
PASSED_MAX = 4096


def _remember(value: str, out: str) -> None:
    if len(value) <= 200:
        if len(PASSED) >= PASSED_MAX:
            PASSED.clear()
        PASSED[value] = out


def passed_name(value: str) -> str | None:
    """`value` under the text rule for names (remembered in PASSED), or None if the rule refuses it or it is
    longer than the values remembered (its line is then checked field by field, which names the problem)."""
    if (out := PASSED.get(value)) is not None:
        return out
    if len(value) > 200:
        return None
    try:
        out = clean_name(value)
    except TextRefused:
        return None
    _remember(value, out)
    return out


class Line:
    """A transcript line's fields, each checked for its JSON type; problems are collected."""

    def __init__(self, rec: dict[str, Any], where: str, problems: list[str]) -> None:
        self.rec, self.where, self.problems = rec, where, problems

    def _bad(self, field: str, what: str) -> None:
        self.problems.append(f"{self.where}: {field} must be {what}, got {json_kind(self.rec.get(field))}")

    def whole(self, field: str, *, default: int | None = None, least: int = 1) -> int | None:
        v = self.rec.get(field)
        if v is None and default is not None:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            self._bad(field, f"a whole number of at least {least}")
            return None
        return v

    def _rule(self, field: str, value: str, *, name: bool) -> str | None:
        """`value` under the one text rule (docs/development.md "The text rule"), or None and a problem."""
        if name and (passed := PASSED.get(value)) is not None:
            return passed
        try:
            out = clean_name(value, f"{self.where}: {field}") if name else clean_text(value, f"{self.where}: {field}")
        except TextRefused as err:
            self.problems.append(str(err))
            return None
        if name:
            _remember(value, out)
        return out

    def name(self, field: str) -> str | None:
        """An identifier: a non-empty string or a whole number (kept as its digits)."""
        v = self.rec.get(field)
        if isinstance(v, str) and v.strip():
            return self._rule(field, v, name=True) or None
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        self._bad(field, "a non-empty string or a whole number")
        return None

    def text(self, field: str, *, default: str | None = "") -> str | None:
        v = self.rec.get(field, default)
        if v is None and default is None and field not in self.rec:
            return None
        if not isinstance(v, str):
            self._bad(field, 'a JSON string ("" for none)')
            return None
        if len(v) > MAX_TEXT_CHARS:
            self.problems.append(f"{self.where}: {field} is {len(v):,} characters, over the "
                                 f"{MAX_TEXT_CHARS:,}-character limit for a text field; shorten it")
            return None
        return self._rule(field, v, name=field in NAMES)

    def flag(self, field: str) -> bool | None:
        v = self.rec.get(field)
        if v is None or isinstance(v, bool):
            return v
        self._bad(field, "true, false or null")
        return None


def check_prediction(prediction: str, task: str, labels: Sequence[str]) -> str | None:
    """Why a prediction cannot be a RAD label or a DRUG reactant set, or None."""
    if task == "rad":
        if normalise_label(prediction) not in {normalise_label(x) for x in labels}:
            return (f"prediction {short(prediction)} is not one of the RAD labels "
                    f"({', '.join(labels)}); use --task text for other labels")
    elif task == "drug":
        if (too_big := smiles_size_problem(prediction)) is not None:  # before RDKit parses it
            return f"prediction: {too_big}"
        try:
            smiles_set(prediction)
        except InvalidSmiles as err:
            return f"prediction is not a reactant set: {err}"
    return None


@dataclass(frozen=True)
class Filed:
    """A message as read, with its line and the facts the file gives (None: not given)."""

    msg: Msg
    where: str


def settle_facts(
    filed: Sequence[Filed], k: int, match: MatchFn | None, problems: list[str], nonconformant: list[str],
) -> list[Msg]:
    """The session's messages with match and changed computed from the content.

    A fact the file gives that the content contradicts is a problem naming the line; where
    MATCH is not exact the file's match is kept. `agree` stays as filed (the expert's judgment).
    A tag that no judgment can give with these facts goes to `nonconformant` with its line
    (when all three facts are known, conformance names it instead).
    """
    out: list[Msg] = []
    for f in filed:
        m = f.msg
        if m.j == 1 or m.tag is Tag.INIT:
            given = [n for n, v in (("match", m.match), ("agree", m.agree), ("changed", m.changed)) if v is not None]
            if given:
                problems.append(f"{f.where}: {', '.join(given)} given for an INIT message, which has no "
                                "facts; leave them null")
            out.append(Msg(m.j, m.sender, m.tag, m.prediction, m.explanation))
            continue
        facts = content_facts(out, m.sender, m.prediction, m.explanation, match)
        mine, theirs = (short(p) for p in facts.compared)
        if facts.match is not None and m.match is not None and m.match != facts.match:
            problems.append(f"{f.where}: match is {str(m.match).lower()} in the file but MATCH over the "
                            f"predictions gives {str(facts.match).lower()} (the {m.sender.value}'s {mine}, "
                            f"the {m.sender.other.value}'s {theirs}); fix or drop the column")
        if m.changed is not None and m.changed != facts.changed:
            how = (f"differs from its message {m.j - 2}" if facts.changed else
                   "cannot change at message 2" if m.j == 2 else f"is the same as its message {m.j - 2}")
            problems.append(f"{f.where}: changed is {str(m.changed).lower()} in the file but the "
                            f"{m.sender.value}'s answer {how}; fix or drop the column")
        decided = facts.match if facts.match is not None else m.match
        if decided is None or m.agree is None:
            why = tag_contradiction(m.tag, m.j, k, facts, m.sender, match=m.match, agree=m.agree)
            if why is not None:
                nonconformant.append(f"{f.where}: {why}")
        out.append(Msg(m.j, m.sender, m.tag, m.prediction, m.explanation, decided, m.agree,
                       facts.changed if m.j > 1 else None))
    return out


def settled_rows(rows: Sequence[Row], key: tuple[Any, ...]) -> list[Row]:
    """The session's messages as settle_facts stores them, from their entries of its conformance key (content's match
    and changed last): for a session whose key settled before with nothing to report."""
    init = Tag.INIT
    return [(j, sender, tag, pred, expl, None, None, None) if j == 1 or tag == init else
            (j, sender, tag, pred, expl, match if entry[7] is None else entry[7], agree, entry[8])
            for (j, sender, tag, pred, expl, match, agree, _), entry in zip(rows, key[3:], strict=True)]
