"""Molecules (DESIGN §6): RDKit's canonical SMILES, reactant sets, and the one error for a SMILES
that does not parse (a parse failure is never a silent mismatch). Used by the DRUG task's MATCH,
the importers and the drawings.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pxp.protocols.errors import PxpError


class InvalidSmiles(PxpError, ValueError):
    """A SMILES string RDKit cannot parse: a parse failure, never a silent mismatch."""


@lru_cache(maxsize=65536)
def canonical_smiles(smiles: str) -> str:
    """RDKit's canonical SMILES of one molecule; InvalidSmiles when it does not parse."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")  # type: ignore[attr-defined]
    text = smiles.strip()
    mol = Chem.MolFromSmiles(text) if text else None
    if mol is None:
        raise InvalidSmiles(f"not a valid SMILES: {smiles!r}")
    return str(Chem.MolToSmiles(mol))


def smiles_set(smiles: str) -> frozenset[str]:
    """The set of canonical SMILES of a dot-separated reactant list."""
    parts = [p for p in re.split(r"[.\s,]+", smiles.strip()) if p]
    if not parts:
        raise InvalidSmiles("no SMILES given")
    out: set[str] = set()
    bad: list[str] = []
    for p in parts:
        try:
            out.update(canonical_smiles(p).split("."))
        except InvalidSmiles:
            bad.append(repr(p[:200]))
    if bad:  # every bad fragment is named, not only the first (issue 17)
        raise InvalidSmiles(f"not a valid SMILES: {', '.join(bad)}")
    return frozenset(out)
