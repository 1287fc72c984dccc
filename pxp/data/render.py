"""Rendering helpers for the app: pure functions returning SVG or PNG bytes (DESIGN §6).

Molecules are drawn with RDKit's rdMolDraw2D; a proposed retrosynthesis step is
drawn as the reaction scheme reactants → target. X-ray images are shown as 8-bit
grayscale PNGs; window/level (width/centre) applies to DICOM-derived images in the
units recorded in the instance's meta["window"]. An invalid SMILES raises
pxp.tasks.base.InvalidSmiles with the offending string, never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageOps
from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.data.chem import InvalidSmiles, check_smiles_size
from pxp.data.images import open_image, png_bytes
from pxp.storage.tables import Asset, Instance


def _mol(smiles: str) -> Any:
    from rdkit import Chem, RDLogger

    check_smiles_size(smiles)
    RDLogger.DisableLog("rdApp.*")  # type: ignore[attr-defined]  # RDKit's stubs omit it
    text = smiles.strip()
    mol = Chem.MolFromSmiles(text) if text else None
    if mol is None:
        raise InvalidSmiles(f"not a valid SMILES: {smiles[:200]!r}")
    return mol


LABEL_PX = 16  # atom labels at least as large as the app's body text


def _legible(drawer: Any) -> None:
    """Transparent background and atom labels of at least LABEL_PX pixels."""
    opts = drawer.drawOptions()
    opts.clearBackground = False
    opts.fixedFontSize = LABEL_PX + 2  # the drawing is shown at 90-100 % of its size
    opts.minFontSize = LABEL_PX


def _svg(drawer: Any) -> bytes:
    drawer.FinishDrawing()
    return str(drawer.GetDrawingText()).encode("utf-8")


def molecule_svg(smiles: str, size: tuple[int, int] = (320, 240)) -> bytes:
    """SVG drawing of a molecule (or of each part of a dot-separated SMILES)."""
    from rdkit.Chem.Draw import rdMolDraw2D

    mol = _mol(smiles)
    drawer = rdMolDraw2D.MolDraw2DSVG(int(size[0]), int(size[1]))
    _legible(drawer)
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    return _svg(drawer)


BOND_PX = 30  # bond length of a reaction's molecules: with LABEL_PX labels, drawn at their natural size
MIN_BOND_PX = 16  # the shortest bond a molecule wider than its column is drawn with (labels keep LABEL_PX)
_GAP = 44  # room for "+" or the arrow before a molecule of a reaction


def molecule_drawing(smiles: str, width: int, height: int) -> tuple[str, dict[str, Any]]:
    """The molecule's SVG (text) and its properties: what the app shows, made in one call
    (run in pxp.data.sandbox's worker processes)."""
    return molecule_svg(smiles, size=(width, height)).decode("utf-8"), molecule_properties(smiles)


def _natural_svg(mol: Any, bond: float = BOND_PX) -> tuple[str, float, float]:
    """A molecule drawn at `bond` pixels per bond on a canvas that fits it: (inner SVG, width, height)."""
    import re

    from rdkit.Chem.Draw import rdMolDraw2D

    drawer = rdMolDraw2D.MolDraw2DSVG(-1, -1)  # a flexible canvas: the size follows the molecule
    opts: Any = drawer.drawOptions()
    opts.scalingFactor = bond / 1.5  # pixels per unit of RDKit's coordinates, where a bond is 1.5 long
    _legible(drawer)
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    svg = _svg(drawer).decode("utf-8")
    size = re.search(r"width='([\d.]+)px' height='([\d.]+)px'", svg)
    w, h = (float(size.group(1)), float(size.group(2))) if size else (200.0, 120.0)
    return svg[svg.index("<svg"):], w, h


def _fitted_svg(smiles: str, room: float) -> tuple[str, float, float]:
    """The molecule at BOND_PX per bond, or with bonds short enough (not below MIN_BOND_PX) to fit `room`."""
    mol = _mol(smiles)
    bond = float(BOND_PX)
    svg, w, h = _natural_svg(mol, bond)
    for _ in range(3):  # labels keep their size as bonds shorten: a second try may be needed
        if w <= room or bond <= MIN_BOND_PX:
            break
        bond = max(MIN_BOND_PX, bond * room / w)
        svg, w, h = _natural_svg(mol, bond)
    return svg, w, h


def reaction_parts(reactants: str, target: str, max_width: int = 640) -> list[tuple[str, int]]:
    """The proposed step reactants (dot-separated SMILES) → target as pieces that wrap like words in
    the page's column: the first reactant, "+ reactant" for each next one, then "→ target"; each an
    SVG (text) with its width in pixels.

    Every molecule is drawn at a fixed bond length with atom labels of LABEL_PX pixels (RDKit's
    reaction drawer scales everything to fit its canvas, which made the labels unreadable), so the
    pieces are shown at their natural size; one wider than `max_width` (the column's width) is drawn
    with shorter bonds, its labels as large. All pieces have one height, so their marks line up.
    """
    check_smiles_size(reactants)
    check_smiles_size(target)
    parts = [p for p in reactants.strip().split(".") if p]
    if not parts:
        raise InvalidSmiles("no reactant SMILES given")
    room = max_width - 1  # a piece's width is rounded up to whole pixels
    mols = [_fitted_svg(p, room - (_GAP if i else 0)) for i, p in enumerate(parts)]
    mols.append(_fitted_svg(target, room - _GAP))
    height = max(h for _, _, h in mols)
    mid = height / 2
    out = []
    for i, (svg, w, h) in enumerate(mols):
        x = _GAP if i else 0
        marks = ""
        if i == len(mols) - 1:
            marks = (f"<path d='M 6 {mid:.0f} H {_GAP - 8}' stroke='black' stroke-width='2'/>"
                     f"<path d='M {_GAP - 16} {mid - 6:.0f} L {_GAP - 6} {mid:.0f} L {_GAP - 16} {mid + 6:.0f}' "
                     "fill='none' stroke='black' stroke-width='2'/>")
        elif i:
            marks = (f"<text x='{_GAP / 2:.0f}' y='{mid + 8:.0f}' font-size='26' text-anchor='middle' "
                     "font-family='sans-serif'>+</text>")
        width = round(x + w)
        inner = svg.replace("<svg ", f"<svg x='{x}' y='{(height - h) / 2:.0f}' ", 1)
        out.append((f"<svg xmlns='http://www.w3.org/2000/svg' version='1.1' width='{width}px' "
                    f"height='{height:.0f}px' viewBox='0 0 {width} {height:.0f}'>{marks}{inner}</svg>", width))
    return out


def molecule_properties(smiles: str) -> dict[str, Any]:
    """Formula, molecular weight, aromatic rings, H-bond donors and acceptors (Lipinski)."""
    from rdkit.Chem import Descriptors, Lipinski, rdMolDescriptors

    mol = _mol(smiles)
    return {
        "formula": rdMolDescriptors.CalcMolFormula(mol),
        "mw": round(float(Descriptors.MolWt(mol)), 2),  # type: ignore[attr-defined]  # RDKit's stubs omit it
        "aromatic_rings": int(rdMolDescriptors.CalcNumAromaticRings(mol)),
        "hbd": int(Lipinski.NumHDonors(mol)),  # type: ignore[attr-defined]  # RDKit's stubs omit it
        "hba": int(Lipinski.NumHAcceptors(mol)),  # type: ignore[attr-defined]  # RDKit's stubs omit it
        "heavy_atoms": int(mol.GetNumHeavyAtoms()),
    }


def pixel_units(im: Image.Image, meta: Mapping[str, Any]) -> tuple[np.ndarray, bool]:
    """Pixel values in the units of meta["window"], and whether to invert for display."""
    win = meta.get("window") if isinstance(meta.get("window"), Mapping) else None
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        arr = np.asarray(im.convert("F") if im.mode != "F" else im, dtype=np.float64)
        if win is not None and "raw_min" in win and "raw_max" in win:
            lo, hi = float(win["raw_min"]), float(win["raw_max"])
            return lo + arr / 65535.0 * (hi - lo), bool(win.get("invert", False))
        return arr, False
    arr = np.asarray(im.convert("L"), dtype=np.float64)
    if win is not None and "center" in win and "width" in win and not win.get("lut"):
        c, w = float(win["center"]), float(win["width"])
        lo, hi = c - w / 2, c + w / 2
        if win.get("invert"):
            arr = 255.0 - arr
        return lo + arr / 255.0 * (hi - lo), bool(win.get("invert", False))
    return arr, False


def xray_display_png(
    asset_bytes: bytes,
    meta: Mapping[str, Any] | None = None,
    window: float | None = None,
    level: float | None = None,
) -> bytes:
    """An 8-bit grayscale PNG of an X-ray asset, with optional window (width) and level (centre).

    Without window/level an 8-bit image is shown as stored; a 16-bit image (the
    full-range asset of a DICOM import) gets its recorded default window, or its
    full range. ImageRejected for bytes that are not a valid PNG/JPEG.
    """
    meta = meta or {}
    im = ImageOps.exif_transpose(open_image(asset_bytes, where="X-ray image"))
    deep = im.mode in ("I;16", "I;16B", "I;16L", "I", "F")
    if window is None and level is None and not deep:
        out = im.convert("L")
    else:
        units, invert = pixel_units(im, meta)
        win = meta.get("window") if isinstance(meta.get("window"), Mapping) else {}
        assert isinstance(win, Mapping)
        lo_all, hi_all = float(units.min()), float(units.max())
        w = float(window) if window is not None else float(win.get("width", hi_all - lo_all))
        c = float(level) if level is not None else float(win.get("center", (hi_all + lo_all) / 2))
        w = max(w, 1e-6)
        scaled = np.clip((units - (c - w / 2)) / w, 0.0, 1.0) * 255.0
        if invert:
            scaled = 255.0 - scaled
        out = Image.fromarray(np.round(scaled).astype(np.uint8))
    return png_bytes(out)


def instance_display_png(
    engine: Engine, instance_id: int, *, window: float | None = None, level: float | None = None
) -> bytes | None:
    """The display PNG of an instance's image; window/level use the full-range asset if any."""
    with DB(engine) as db:
        inst = db.get(Instance, instance_id)
        if inst is None or inst.asset_sha256 is None:
            return None
        meta = dict(inst.meta or {})
        sha = inst.asset_sha256
        win = meta.get("window")
        if (window is not None or level is not None) and isinstance(win, dict):
            sha = str(win.get("raw_sha256") or sha)
        asset = db.get(Asset, sha)
        if asset is None:
            return None
        data = asset.data
    return xray_display_png(data, meta, window=window, level=level)
