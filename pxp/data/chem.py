"""Molecules (DESIGN §6): RDKit's canonical SMILES, reactant sets, and the one error for a SMILES
that does not parse (a parse failure is never a silent mismatch). Used by the DRUG task's MATCH,
the importers and the drawings.

Every SMILES from a user or a file passes `check_smiles_size` before RDKit sees it: a cheap count of
characters, atoms and fragments against limits sized for one-step retrosynthesis reactants (the
study's and USPTO-50k's reactant sets stay far below them; docs/operations.md "Importing data" (limits)). A SMILES over
a limit is `SmilesTooLarge`, one line naming the limit, in the form, the importers and the CLI alike.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pxp.protocols.errors import PxpError


class InvalidSmiles(PxpError, ValueError):
    """A SMILES string RDKit cannot parse: a parse failure, never a silent mismatch."""


class SmilesTooLarge(InvalidSmiles):
    """A SMILES over one of the size limits: refused before RDKit parses it."""


SMILES_MAX_CHARS = 1000
"""Longest SMILES accepted (characters): one target or one reactant set of a one-step reaction."""
SMILES_MAX_ATOMS = 250
"""Most atoms in one SMILES (all its fragments together), counted from the text before parsing."""
SMILES_MAX_FRAGMENTS = 10
"""Most dot-separated molecules (reactants, reagents) in one SMILES."""
_ATOM = re.compile(r"\[[^\]]*\]|Br|Cl|[BCNOPSFIbcnops*]")
_SPLIT = re.compile(r"[.\s,]+")


def check_smiles_size(smiles: str) -> None:
    """Refuse (SmilesTooLarge, one line naming the limit) a SMILES over a size limit.

    Cheap and RDKit-free: characters, atom symbols (bracket atoms and the organic subset) and
    dot-separated fragments are counted on the text, so nothing slow runs on a huge input.
    """
    text = smiles.strip()
    if len(text) > SMILES_MAX_CHARS:
        raise SmilesTooLarge(f"SMILES too long: {len(text):,} characters, over the limit of "
                             f"{SMILES_MAX_CHARS:,} characters for one-step reactants")
    fragments = len([p for p in _SPLIT.split(text) if p])
    if fragments > SMILES_MAX_FRAGMENTS:
        raise SmilesTooLarge(f"SMILES has too many molecules: {fragments} dot-separated fragments, over "
                             f"the limit of {SMILES_MAX_FRAGMENTS} for one-step reactants")
    atoms = len(_ATOM.findall(text))
    if atoms > SMILES_MAX_ATOMS:
        raise SmilesTooLarge(f"SMILES too large: {atoms:,} atoms, over the limit of {SMILES_MAX_ATOMS} "
                             "atoms for one-step reactants")


def smiles_size_problem(smiles: str) -> str | None:
    """The one line of `check_smiles_size` for a SMILES over a limit, else None."""
    try:
        check_smiles_size(smiles)
    except SmilesTooLarge as err:
        return str(err)
    return None


@lru_cache(maxsize=65536)
def canonical_smiles(smiles: str) -> str:
    """RDKit's canonical SMILES of one molecule; InvalidSmiles when it does not parse."""
    from rdkit import Chem, RDLogger

    check_smiles_size(smiles)
    RDLogger.DisableLog("rdApp.*")  # type: ignore[attr-defined]  # RDKit's stubs omit it
    text = smiles.strip()
    mol = Chem.MolFromSmiles(text) if text else None
    if mol is None:
        raise InvalidSmiles(f"not a valid SMILES: {smiles[:200]!r}")
    return str(Chem.MolToSmiles(mol))


def smiles_set(smiles: str) -> frozenset[str]:
    """The set of canonical SMILES of a dot-separated reactant list (size-checked first)."""
    check_smiles_size(smiles)
    parts = [p for p in _SPLIT.split(smiles.strip()) if p]
    if not parts:
        raise InvalidSmiles("no SMILES given")
    out: set[str] = set()
    bad: list[str] = []
    for p in parts:
        try:
            out.update(canonical_smiles(p).split("."))
        except InvalidSmiles:
            bad.append(repr(p[:200]))
    if bad:  # every bad fragment is named, not only the first
        raise InvalidSmiles(f"not a valid SMILES: {', '.join(bad)}")
    return frozenset(out)


@lru_cache(maxsize=256)
def molfile(smiles: str) -> str:
    """A V2000 molfile of a reactant list, its molecules laid out in 2D by RDKit, for an editor that
    reads molfiles itself (Ketcher draws one without its Indigo toolkit); InvalidSmiles as
    smiles_set."""
    from rdkit import Chem
    from rdkit.Chem import rdDepictor

    smiles_set(smiles)  # the size limits, and the one error naming every bad molecule
    mol = Chem.MolFromSmiles(".".join(p for p in _SPLIT.split(smiles.strip()) if p))
    rdDepictor.Compute2DCoords(mol)
    return str(Chem.MolToMolBlock(mol))
