"""The one text rule of pxp (docs/development.md "The text rule"), applied at every entrance.

Every text that enters pxp (an importer's cell, a form's field, a CLI option, a provider's
reply, the team table) passes through one of two functions before it is compared or stored:

- `clean_name` for identifiers and short values (keys, labels, predictions, names, emails,
  SMILES): every control character (tab and newline included) is refused; zero-width and
  bidi-control (format, `Cf`) characters are removed, then NFC; every Unicode space (no-break, ideographic,
  line and paragraph separators) becomes one space, runs of spaces fold, the ends are trimmed.
- `clean_text` for free text (explanations, reports, replies): NFC; CR LF and a lone CR become
  LF; tab and newline are kept; any other control character (NUL included) is refused; format
  characters are kept, since joiners and marks can be part of a written language.

Two values equal after the rule are the same value. A refusal is a `TextRefused` whose message
names the field (the caller passes "data.csv:12: key" or "the reply's explanation") and the
character, so SQLite and PostgreSQL see exactly the same text and refuse nothing on their own.
Pure: no I/O, importing nothing of pxp but the base error.
"""

from __future__ import annotations

import re
import unicodedata

from pxp.protocols.errors import PxpError

#: control characters free text may hold
FREE_TEXT_CONTROLS = frozenset("\t\n")
_SPACES = re.compile(r"\s+")
#: an ASCII character free text may not hold as it is (controls but tab and newline; CR is normalised)
_ASCII_NOT_FREE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


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
    return _SPACES.sub(" ", text).strip()


def clean_text(value: str, field: str = "text") -> str:
    """Free text under the text rule (see the module docstring)."""
    if value.isascii() and _ASCII_NOT_FREE.search(value) is None:
        return value  # the common case, unchanged by the rule
    text = unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    _refuse_controls(text, field, FREE_TEXT_CONTROLS)
    return text


def optional_name(value: str | None, field: str = "value") -> str | None:
    """`clean_name` of a value that may be absent; None and a value empty after the rule give None."""
    if value is None:
        return None
    text = clean_name(value, field)
    return text or None


def strip_bom(text: str) -> str:
    """A text file's content without the byte-order mark an editor (Windows Notepad) may write."""
    return text[1:] if text.startswith("\ufeff") else text
