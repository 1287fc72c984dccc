"""The one text rule of pxp (docs/development.md "The text rule"), applied at every entrance.

Every text that enters pxp (an importer's cell, a form's field, a CLI option, a provider's
reply, the team table) passes through one of two functions before it is compared or stored:

- `clean_name` for identifiers and short values (keys, labels, predictions, names, emails,
  SMILES): every control character (tab and newline included) is refused; zero-width and
  bidi-control (format, `Cf`) characters are removed, then NFC; full-width ASCII forms (U+FF01 to
  U+FF5E) become ASCII, as NFKC makes them; every Unicode space (no-break, ideographic,
  line and paragraph separators) becomes one space, runs of spaces fold, the ends are trimmed.
- `clean_text` for free text (explanations, reports, replies): NFC; CR LF and a lone CR become
  LF; tab and newline are kept; any other control character (NUL included) is refused; format
  characters are kept, since joiners and marks can be part of a written language.

Two values equal after the rule are the same value. Identities (emails, group, dataset and
experiment names, labels) are compared by `identity`: a word mixing Latin, Cyrillic or Greek is
refused, and two values with one UTS #39 skeleton (`skeleton`) are one identity. A refusal is
a `TextRefused` whose message names the field (the caller passes "data.csv:12: key" or "the
reply's explanation") and the character, so SQLite and PostgreSQL see exactly the same text
and refuse nothing on their own.
Pure: no I/O of its own (the confusables come from the confusable-homoglyphs package's data),
importing nothing of pxp but the base error.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from typing import NamedTuple

from pxp.protocols.errors import PxpError

#: control characters free text may hold
FREE_TEXT_CONTROLS = frozenset("\t\n")
_SPACES = re.compile(r"\s+")
#: an ASCII character free text may not hold as it is (controls but tab and newline; CR is normalised)
_ASCII_NOT_FREE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: full-width ASCII forms (U+FF01..U+FF5E) to ASCII, what NFKC makes of them
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
#: the scripts no single word may mix: each has letters that look like another's
_LOOK_ALIKE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")


class TextRefused(PxpError, ValueError):
    """A text pxp will not store (a NUL or another control character); its message is one line
    naming the field and the character."""


def char_name(ch: str) -> str:
    """'U+0000 (NUL)': how a refused or removed character is named to a user."""
    name = unicodedata.name(ch, "") or {"\x00": "NUL", "\x7f": "DEL"}.get(ch, "control character")
    return f"U+{ord(ch):04X} ({name})"


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc"


def _refuse_controls(text: str, field: str, allowed: frozenset[str]) -> None:
    for ch in text:
        if _is_control(ch) and ch not in allowed:
            raise TextRefused(f"{field}: contains the control character {char_name(ch)}; remove it")


def is_invisible(ch: str) -> bool:
    """A zero-width or bidi-control character (Unicode category Cf: ZWSP, ZWJ, LRM, RLO, the
    byte-order mark, the soft hyphen, ...), removed from names."""
    return unicodedata.category(ch) == "Cf"


def clean_name(value: str, field: str = "value") -> str:
    """An identifier or short value under the text rule (see the module docstring); may be ''."""
    if value.isascii() and value.isprintable() and "  " not in value and value == value.strip():
        return value  # the common case, unchanged by the rule
    _refuse_controls(value, field, frozenset())
    text = unicodedata.normalize("NFC", "".join(ch for ch in value if not is_invisible(ch)))
    return _SPACES.sub(" ", text.translate(_FULL_WIDTH)).strip()


def clean_text(value: str, field: str = "text") -> str:
    """Free text under the text rule (see the module docstring)."""
    if value.isascii() and (value.isprintable() or _ASCII_NOT_FREE.search(value) is None):
        return value  # the common case, unchanged by the rule (a printable ASCII text holds no control at all)
    text = unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    _refuse_controls(text, field, FREE_TEXT_CONTROLS)
    return text


@cache
def _prototypes() -> dict[str, str]:
    """UTS #39's confusable mapping (confusables.txt: each source character to its prototype).

    confusable-homoglyphs ships each line of confusables.txt both ways (source to prototype and
    back); a source has exactly one partner (its prototype), a prototype has every source
    mapped to it, and a multi-character partner is always a prototype. A pair that only knows
    each other maps to the partner that occurs in some prototype, else to the lower code point:
    the same classes of equal skeletons as UTS #39's.
    """
    from confusable_homoglyphs.confusables import confusables_data

    partners: dict[str, set[str]] = {}
    for key, found in confusables_data.items():  # the data marks right-to-left text with U+200E
        partners.setdefault(key.replace("\u200e", ""), set()).update(f["c"].replace("\u200e", "") for f in found)
    in_prototypes = {ch for key in partners if len(key) > 1 for ch in key}
    out: dict[str, str] = {}
    for ch, found in partners.items():
        if len(ch) != 1 or len(found) != 1:
            continue  # a multi-character prototype, or a prototype of several sources
        (other,) = found
        a_source = len(other) > 1 or len(partners.get(other, ())) > 1
        if a_source or (ch not in in_prototypes and (other in in_prototypes or other < ch)):
            out[ch] = other
    return out


#: `_prototypes` of the ASCII characters that have one (tests/protocols/test_identity.py checks it is): an ASCII
#: text's skeleton without loading the confusables data, 0.05-0.1 s of a command (docs/development.md, "Start-up")
_ASCII_PROTOTYPES = str.maketrans({'"': "''", "%": "\u00ba/\u2080", "0": "O", "1": "l", "I": "l", "`": "'", "m": "rn",
                                   "|": "l"})


def skeleton(text: str) -> str:
    """The UTS #39 skeleton: NFD, each character to its confusable prototype, NFD again."""
    if text.isascii():  # NFD leaves ASCII as it is
        return unicodedata.normalize("NFD", text.translate(_ASCII_PROTOTYPES))
    mapping = _prototypes()
    nfd = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(mapping.get(ch, ch) for ch in nfd))


def _script(ch: str) -> str:
    from confusable_homoglyphs.categories import alias

    return str(alias(ch))


def refuse_mixed_scripts(text: str, field: str) -> None:
    """Refuse (TextRefused, one line naming the characters) a word that mixes Latin, Cyrillic or Greek."""
    for word in re.findall(r"\w+", text):
        if word.isascii():
            continue
        scripts = [_script(ch) for ch in word]
        used = [s for s in _LOOK_ALIKE_SCRIPTS if s in scripts]
        if len(used) < 2:
            continue
        main = max(used, key=lambda s: (scripts.count(s), s == "LATIN"))
        odd = ", ".join(dict.fromkeys(char_name(ch) for ch, s in zip(word, scripts, strict=True)
                                      if s in used and s != main))
        raise TextRefused(f"{field}: {word!r} mixes {main.title()} with {odd}, which look alike; "
                          "type it in one script")


class Identity(NamedTuple):
    """A value under the text rule (`text`, what is stored) and its skeleton (`key`, what is compared)."""

    text: str
    key: str


def identity(value: str, field: str = "value") -> Identity:
    """`clean_name` of an identity (an email, a group, dataset or experiment name, a label), with
    its words in one script each (`refuse_mixed_scripts`) and its skeleton to compare it by."""
    text = clean_name(value, field)
    if not text.isascii():
        refuse_mixed_scripts(text, field)
    return Identity(text, skeleton(text))


def same_identity(value: str, stored: Iterable[str], field: str = "value") -> str | None:
    """The stored value that is the same identity as `value` (an equal skeleton; itself first), or None."""
    key = identity(value, field).key
    found = [s for s in stored if skeleton(s) == key]
    return value if value in found else (found[0] if found else None)


def optional_name(value: str | None, field: str = "value") -> str | None:
    """`clean_name` of a value that may be absent; None and a value empty after the rule give None."""
    if value is None:
        return None
    text = clean_name(value, field)
    return text or None


def strip_bom(text: str) -> str:
    """A text file's content without the byte-order mark an editor (Windows Notepad) may write."""
    return text[1:] if text.startswith("\ufeff") else text
