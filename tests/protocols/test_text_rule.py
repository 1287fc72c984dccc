"""The one text rule (pxp/protocols/text.py, docs/development.md "The text rule")."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pxp.protocols.text import TextRefused, clean_name, clean_text, strip_bom

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e", "\u200f", "\u202a", "\u202e", "\u2066",
             "\u2069", "\u00ad"]
SPACES = ["\u00a0", "\u2009", "\u3000", "\u2028"]
COMBINING = ["\u0301", "\u0308", "\u0327"]


def test_invisible_characters_vanish_from_names() -> None:
    assert clean_name("Pneu\u200bmonia") == "Pneumonia"
    assert clean_name("a\u200b") == clean_name("a") == "a"
    assert clean_name("a\u00a0b") == clean_name("a b") == clean_name(" a  b ")
    assert clean_name("\u202eevil") == "evil"


def test_composed_and_decomposed_are_one_value() -> None:
    assert clean_name("Ple\u0301vre") == clean_name("Pl\u00e9vre") == "Pl\u00e9vre"
    assert clean_text("e\u0301") == "\u00e9"


@pytest.mark.parametrize("ch", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\t", "\n"])
def test_controls_are_refused_in_names_with_the_field(ch: str) -> None:
    with pytest.raises(TextRefused, match=r"^data.csv:3: key: contains the control character U\+"):
        clean_name(f"a{ch}b", "data.csv:3: key")


def test_free_text_keeps_tab_newline_and_joiners_refuses_nul() -> None:
    assert clean_text("line 1\r\nline\t2\r") == "line 1\nline\t2\n"
    assert clean_text("\u0915\u094d\u200d\u0937") == "\u0915\u094d\u200d\u0937"  # a ZWJ in Devanagari stays
    with pytest.raises(TextRefused, match="explanation: contains the control character U\\+0000"):
        clean_text("Frontal\x00 film", "explanation")


def test_byte_order_mark() -> None:
    assert strip_bom("\ufeff[auth]") == "[auth]"
    assert strip_bom("[auth]") == "[auth]"


_piece = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Cf", "Zs", "Zl", "Zp")),
                 min_size=1, max_size=12)


@given(_piece, st.lists(st.sampled_from(INVISIBLE + SPACES + COMBINING), max_size=4), st.randoms())
def test_inserted_invisible_characters_give_the_same_value(base: str, extra: list[str], rnd) -> None:  # type: ignore[no-untyped-def]
    """Random strings with zero-width, bidi, space and combining characters inserted: the rule
    gives the value the same string gives with only those visible differences (or refuses it)."""
    text = base
    for ch in extra:
        at = rnd.randint(0, len(text))
        text = text[:at] + ch + text[at:]
    cleaned = clean_name(text)
    assert cleaned == clean_name(cleaned)  # idempotent
    assert cleaned == unicodedata.normalize("NFC", cleaned)
    assert not any(unicodedata.category(c) in ("Cf", "Cc") for c in cleaned)
    without = "".join(c for c in text if c not in INVISIBLE)
    assert cleaned == clean_name(without)
    assert clean_text(cleaned) == cleaned


def test_provider_text_follows_the_same_rule() -> None:
    """A reply's label with a zero-width space inside is that label; a NUL in its explanation is a format
    failure naming the field (pxp.tasks.spec, the parse of every provider's reply)."""
    import json

    from pxp.tasks.rad import rad_spec
    from pxp.tasks.spec import FormatProblem

    RAD = rad_spec()

    y, e = RAD.parse(json.dumps({"prediction": "Pneu\u200bmonia", "explanation": "Patchy  consolidation."}))
    assert (y, e) == ("Pneumonia", "Patchy  consolidation.")
    y, _ = RAD.parse("Prediction: Pleural\u00a0Effusion\nExplanation: blunted angle")
    assert y == "Pleural Effusion"
    with pytest.raises(FormatProblem, match="the Explanation: contains the control character U\\+0000"):
        RAD.parse(json.dumps({"prediction": "Pneumonia", "explanation": "Patchy\u0000 consolidation."}))
