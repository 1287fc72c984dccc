"""One identity rule (docs/development.md "The text rule"): values are compared by their UTS #39 skeleton,
a word mixing Latin with Cyrillic or Greek is refused in one line naming the characters, full-width
forms are their ASCII selves; for emails, group, dataset and experiment names and labels, a random
look-alike of a value is either that value's identity or refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pxp.data.match import label_identity, label_in, label_set
from pxp.protocols.text import TextRefused, clean_name, identity, same_identity, skeleton
from pxp.tasks.custom import TaskConfigError, load_task_config
from pxp.team.access import TeamError, _key

#: look-alikes of Latin letters: Cyrillic, Greek, and the full-width form of every letter
CYRILLIC = dict(zip("aeopcxyijsdqwh", "аеорсхуіјѕԁԛԝһ", strict=True))
GREEK = dict(zip("aopviyu", "αορνιγυ", strict=True))
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _full_width(ch: str) -> str:
    return chr(ord(ch) + 0xFEE0)


def test_the_skeleton_is_that_of_uts_39() -> None:
    assert skeleton("paypal") == skeleton("раураl") == skeleton("ρaypal")
    assert skeleton("0") == skeleton("O") and skeleton("I") == skeleton("l") == skeleton("1")
    assert skeleton("m") == "rn"
    assert skeleton("apple") != skeleton("appel")
    assert skeleton("Café") == skeleton("Cafe\u0301")  # NFD first


def test_an_ascii_skeleton_is_the_confusables_data_s_without_loading_it() -> None:
    """ASCII text maps through pxp.protocols.text._ASCII_PROTOTYPES (no data loaded: docs/development.md,
    "Start-up"): the same prototypes as UTS #39's data, and so the same skeleton as the whole mapping gives."""
    import unicodedata

    from pxp.protocols.text import _ASCII_PROTOTYPES, _prototypes

    ascii_ = "".join(map(chr, range(128)))
    whole = _prototypes()
    assert {ord(c): p for c, p in whole.items() if c.isascii()} == _ASCII_PROTOTYPES
    for text in (ascii_, "demo-rad 1%", "I|1l0O `m\"", ""):
        assert skeleton(text) == unicodedata.normalize("NFD", "".join(whole.get(ch, ch) for ch in text))


@pytest.mark.parametrize(("typed", "named"), [
    ("аdmin", "U+0430 (CYRILLIC SMALL LETTER A)"),
    ("bοss", "U+03BF (GREEK SMALL LETTER OMICRON)"),
    ("Мaria", "U+041C (CYRILLIC CAPITAL LETTER EM)"),
    ("раураl", "U+006C (LATIN SMALL LETTER L)"),  # mostly Cyrillic: the Latin letter is the odd one
])
def test_a_word_mixing_scripts_is_refused_naming_the_characters(typed: str, named: str) -> None:
    with pytest.raises(TextRefused) as e:
        identity(typed, "the dataset name")
    line = str(e.value)
    assert line.startswith("the dataset name: ") and named in line and "\n" not in line


def test_words_in_one_script_each_are_kept() -> None:
    assert identity("Мария Smith").text == "Мария Smith"  # two words, one script each
    assert identity("Ωμέγα").text == "Ωμέγα"
    assert identity("naïve café").text == "naïve café"


def test_full_width_forms_are_their_ascii_selves() -> None:
    assert clean_name("ａｄｍｉｎ＠ｅｘａｍｐｌｅ．ｏｒｇ") == "admin@example.org"
    assert identity("Ｄｅｍｏ").text == "Demo"
    assert same_identity("ape", ["аре", "other"]) == "аре"
    assert same_identity("other", ["аре", "other"]) == "other"
    assert same_identity("new", ["аре"]) is None


def test_labels_of_a_set_are_identities() -> None:
    allowed = label_set(["Ape", "Owl"], "data.csv")
    assert label_in(allowed, "Аре", "data.csv:2") == "Ape"  # all Cyrillic: the label it looks like
    assert isinstance(label_in(allowed, "Bee", "data.csv:2"), TextRefused)
    line = r"^data\.csv: --labels: 'Аре' looks the same as 'Ape'; give each label once$"
    with pytest.raises(TextRefused, match=line):
        label_set(["Ape", "Аре"], "data.csv")
    with pytest.raises(TextRefused, match="U\\+0430 \\(CYRILLIC SMALL LETTER A\\)"):
        label_set(["Pneumoniа"], "data.csv")


def test_a_task_file_s_labels_follow_the_rule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = 'name = "grade"\nmatch = "label"\n'
    for labels, why in (('["Ape", "Аре"]', "looks the same as"), ('["Pneumoniа"]', "CYRILLIC SMALL LETTER A")):
        f = tmp_path / "task.toml"
        f.write_text(base + f"labels = {labels}\n", encoding="utf-8")
        with pytest.raises(TaskConfigError) as e:
            load_task_config(f)
        assert why in str(e.value) and "\n" not in str(e.value)


@st.composite
def look_alike(draw: st.DrawFn) -> tuple[str, str]:
    """(a lower-case Latin word, the same word with random letters swapped for look-alikes)."""
    word = draw(st.text(alphabet=LETTERS, min_size=1, max_size=8))
    out = []
    for ch in word:
        table = draw(st.sampled_from(("keep", "cyrillic", "greek", "full")))
        sub = {"cyrillic": CYRILLIC.get(ch), "greek": GREEK.get(ch), "full": _full_width(ch)}.get(table)
        out.append(sub or ch)
    return word, "".join(out)


def _same_or_refused(base_key: str, make) -> None:  # type: ignore[no-untyped-def]
    try:
        assert make() == base_key
    except (TextRefused, TeamError) as err:
        assert "mixes" in str(err) and "\n" not in str(err), str(err)


@settings(max_examples=300, deadline=None)
@given(look_alike(), look_alike())
def test_a_look_alike_is_the_same_identity_or_refused(a: tuple[str, str], b: tuple[str, str]) -> None:
    (word, typed), (other, typed_other) = a, b
    email, email_typed = f"{word}.{other}@example.org", f"{typed}.{typed_other}@example.org"
    _same_or_refused(_key(email, "email").key, lambda: _key(email_typed, "email").key)
    _same_or_refused(_key(f"{word} {other}", "group").key, lambda: _key(f"{typed} {typed_other}", "group").key)
    for name, name_typed in ((f"{word}-{other}", f"{typed}-{typed_other}"), (word, typed)):  # datasets, experiments
        _same_or_refused(identity(name).key, lambda n=name_typed: identity(n).key)  # type: ignore[misc]
    _same_or_refused(label_identity(word), lambda: label_identity(identity(typed).text))
    if all(ch in CYRILLIC for ch in word):  # wholly Cyrillic: never refused, always the same identity
        whole = "".join(CYRILLIC[ch] for ch in word)
        assert identity(whole).key == identity(word).key
        assert same_identity(whole, [word]) == word
