"""The Annotate form refuses a SMILES over a size limit in one line naming the limit, at the limit
and one over (docs/operations.md "Importing data" (limits)); the refusal and any SMILES error show text, not markup."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from pxp.data.chem import SMILES_MAX_ATOMS, SMILES_MAX_CHARS, SMILES_MAX_FRAGMENTS
from tests.app.test_app import app_db, by_suffix, login, new_app, ok, plain  # noqa: F401  (app_db is a fixture)
from tests.data.test_input_limits import CASES
from tests.factories import make_drug


@pytest.mark.parametrize("limit", sorted(CASES))
def test_the_smiles_field_at_and_one_over_each_limit(app_db: tuple[str, Engine], limit: str) -> None:  # noqa: F811
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    at_limit, over, words = CASES[limit]
    by_suffix(at.text_input, "_pred").input(over).run()
    ok(at)
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and words in errors[0] and "\n" not in errors[0], errors
    by_suffix(at.text_input, "_pred").input(at_limit).run()
    ok(at)
    assert not at.error, [e.value for e in at.error]
    assert any(c.value == "Canonical form:" for c in at.caption)


def test_huge_smiles_are_one_line(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    for n in (20000, 3000):
        by_suffix(at.text_input, "_pred").input("C" * n).run()
        ok(at)
        assert [plain(e.value) for e in at.error] == [
            f"Cannot send: SMILES too long: {n:,} characters, over the limit of {SMILES_MAX_CHARS:,} characters for "
            "one-step reactants"]
    assert SMILES_MAX_ATOMS < SMILES_MAX_CHARS and SMILES_MAX_FRAGMENTS < SMILES_MAX_ATOMS


def test_a_smiles_error_line_is_text(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    """Markdown in the field comes back escaped: no image, link or directive is made from it."""
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    by_suffix(at.text_input, "_pred").input("![x](http://2130706433:9/x)").run()
    ok(at)
    [line] = [e.value for e in at.error]
    assert "\\!\\[x\\]\\(http\\:\\/\\/" in line and "](" not in line
