"""Text alternatives of the molecule drawings (docs/accessibility.md, "Text alternatives"): the
molecule's name where known and always its SMILES, so a screen reader says what a chemist sees.

They reach the page as the images' alt attributes (st.image's `alt`), never as HTML.
"""

from __future__ import annotations


def _name(name: object) -> str:
    """A dataset's name of a molecule (any stored value; None or blank: none) as one line of words."""
    return " ".join(str(name).split()) if name is not None else ""


def molecule_alt(smiles: str, name: object = None) -> str:
    """The alt text of one molecule's drawing."""
    named = f" of {_name(name)}" if _name(name) else ""
    return f"Drawing of the molecule{named}, SMILES {smiles.strip()}"


def reaction_alts(reactants: str, target: str, target_name: object = None) -> list[str]:
    """The alt texts of the pieces of a drawn step (pxp.data.render.reaction_parts: each reactant, then
    "→ target"), in their order."""
    parts = [p for p in reactants.strip().split(".") if p]
    n = len(parts)
    alts = [("Reactant" if i == 0 else "plus reactant") + f" {i + 1} of {n}, SMILES {p}" for i, p in enumerate(parts)]
    named = f" {_name(target_name)}" if _name(target_name) else ""
    return [*alts, f"gives the target{named}, SMILES {target.strip()}"]
