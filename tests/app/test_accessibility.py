"""Accessibility that can be checked without a browser (docs/accessibility.md; the axe audit of every page is
tests/browser/test_browser_a11y.py): the theme's contrast for Streamlit's faded text, the drawings' text
alternatives against the pieces RDKit really draws, and the charts' tables."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from pxp.app.a11y.alt import molecule_alt, reaction_alts
from pxp.data.importers.transcripts import import_transcripts
from pxp.data.render import reaction_parts
from tests.analysis.test_analytics import VECTORS, write_vectors
from tests.app.test_analytics_page import app_db, ok, page  # noqa: F401  (app_db is a fixture)

ROOT = Path(__file__).resolve().parents[2]


def _luminance(rgb: tuple[float, ...]) -> float:
    lin = [(v / 255 / 12.92) if v / 255 <= 0.03928 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """WCAG 2's contrast ratio of two sRGB colours."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _rgb(hex_colour: str) -> tuple[int, ...]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def test_the_theme_gives_faded_text_4_5_to_1_on_every_background() -> None:
    """Streamlit draws captions and shortcut hints in the text colour at 60% opacity: on the page (white), the
    sidebar and the widgets' backgrounds (#f8f8f7, #f1f0ee) that reaches 4.5:1 with the theme's textColor, and
    did not with Streamlit's own (#2f2d2b)."""
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]

    def faded_on(text: str, bg: str) -> float:
        t, b = _rgb(text), _rgb(bg)
        return contrast(tuple(0.6 * x + 0.4 * y for x, y in zip(t, b, strict=True)), b)

    for bg in ("#ffffff", "#f8f8f7", "#f1f0ee"):
        assert faded_on(theme["textColor"], bg) >= 4.5, bg
    assert faded_on("#2f2d2b", "#ffffff") < 4.5  # Streamlit's default text colour, which the audit found
    assert contrast(_rgb(theme["primaryColor"]), (255, 255, 255)) >= 4.5  # white text on the primary buttons


def test_a_molecule_drawing_says_its_name_and_smiles() -> None:
    assert molecule_alt(" CC(=O)Nc1ccc(O)cc1 ", "Paracetamol") == (
        "Drawing of the molecule of Paracetamol, SMILES CC(=O)Nc1ccc(O)cc1")
    assert molecule_alt("CCO") == molecule_alt("CCO", "  ") == "Drawing of the molecule, SMILES CCO"
    assert molecule_alt("CCO", "ethyl\n alcohol") == "Drawing of the molecule of ethyl alcohol, SMILES CCO"


@pytest.mark.parametrize("reactants", ["CC(=O)OC(C)=O.Nc1ccc(O)cc1", "OC(=O)c1ccccc1", "CCO.CC(=O)O.O"])
def test_each_drawn_piece_of_a_step_has_its_text(reactants: str) -> None:
    """One alt text per piece RDKit draws (each reactant, then the target), in their order."""
    target = "CC(=O)Nc1ccc(O)cc1"
    alts = reaction_alts(reactants, target, "Paracetamol")
    assert len(alts) == len(reaction_parts(reactants, target))
    mols = reactants.split(".")
    assert alts[0] == f"Reactant 1 of {len(mols)}, SMILES {mols[0]}"
    assert all(f"SMILES {m}" in a for m, a in zip(mols, alts, strict=False))
    assert alts[-1] == f"gives the target Paracetamol, SMILES {target}"


def test_figure_1_has_its_data_as_a_table(app_db: tuple[str, Engine], tmp_path: Path) -> None:  # noqa: F811
    """Figure 1's curves are also a table under it (its text alternative), with the curves' numbers."""
    _, engine = app_db
    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    at: AppTest = page()
    ok(at.radio(key="analytics_view").set_value("Figure 1").run())
    table = next(e for e in at.expander if e.label == "Figure 1 as a table")
    df = table.dataframe[0].value
    two_way = df[df.metric == "two_way"]
    assert two_way["median (sessions)"].tolist() == [0, 0, 1, 2, 2, 2, 2, 2, 2, 2]  # the curve (test_analytics_page)
    assert set(df.group) == {"vectors"}
