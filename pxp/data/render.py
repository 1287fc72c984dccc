"""Rendering helpers for the app: pure functions returning SVG or PNG bytes (DESIGN §6).

Molecules are drawn with RDKit's rdMolDraw2D; a proposed retrosynthesis step is
drawn as the reaction scheme reactants → target. X-ray images are shown as 8-bit
grayscale PNGs; window/level (width/centre) applies to DICOM-derived images in the
units recorded in the instance's meta["window"]. An invalid SMILES raises
pxp.tasks.base.InvalidSmiles with the offending string, never a crash.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageOps
from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.data.chem import InvalidSmiles, check_smiles_size
from pxp.data.images import open_image
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
_GAP = 44  # room for "+" and the arrow between the molecules of a reaction


def molecule_drawing(smiles: str, width: int, height: int) -> tuple[str, dict[str, Any]]:
    """The molecule's SVG (text) and its properties: what the app shows, made in one call
    (run in pxp.data.sandbox's worker processes)."""
    return molecule_svg(smiles, size=(width, height)).decode("utf-8"), molecule_properties(smiles)


def reaction_drawing(reactants: str, target: str) -> tuple[str, int]:
    """The proposed step's SVG (text) and its natural width (run in pxp.data.sandbox's workers)."""
    svg = reaction_svg(reactants, target)
    return svg.decode("utf-8"), reaction_width(svg)


def _natural_svg(mol: Any) -> tuple[str, float, float]:
    """A molecule drawn at BOND_PX per bond on a canvas that fits it: (inner SVG, width, height)."""
    import re

    from rdkit.Chem.Draw import rdMolDraw2D

    drawer = rdMolDraw2D.MolDraw2DSVG(-1, -1)  # a flexible canvas: the size follows the molecule
    opts: Any = drawer.drawOptions()
    opts.fixedBondLength = BOND_PX
    _legible(drawer)
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    svg = _svg(drawer).decode("utf-8")
    size = re.search(r"width='([\d.]+)px' height='([\d.]+)px'", svg)
    w, h = (float(size.group(1)), float(size.group(2))) if size else (200.0, 120.0)
    return svg[svg.index("<svg"):], w, h


def reaction_svg(reactants: str, target: str, max_width: int = 640) -> bytes:
    """SVG of the proposed step: the reactants (dot-separated SMILES) → the target.

    Each molecule is drawn at a fixed bond length with atom labels of LABEL_PX pixels (RDKit's
    reaction drawer scales everything to fit its canvas, which made the labels unreadable), so the
    scheme is shown at its natural size; wider than `max_width`, the target moves to a second row.
    """
    check_smiles_size(reactants)
    parts = [p for p in reactants.strip().split(".") if p]
    if not parts:
        raise InvalidSmiles("no reactant SMILES given")
    left = [_natural_svg(_mol(p)) for p in parts]
    right = _natural_svg(_mol(target))
    items: list[tuple[str, float, float, float]] = []  # (svg, x, y, height) on its row
    row_h = max(h for _, _, h in left)
    x, marks = 0.0, []
    for i, (svg, w, h) in enumerate(left):
        if i:
            marks.append(("+", x + _GAP / 2, row_h / 2))
            x += _GAP
        items.append((svg, x, (row_h - h) / 2, h))
        x += w
    arrow_x, y0 = x + 8, 0.0
    if arrow_x + _GAP + 16 + right[1] > max_width:  # too wide: "→ target" on a second row
        arrow_x, y0 = 8.0, row_h + 16
    height = y0 + right[2] if y0 else max(row_h, right[2])
    mid = y0 + right[2] / 2 if y0 else height / 2
    items.append((right[0], arrow_x + _GAP + 8, y0 if y0 else (height - right[2]) / 2, right[2]))
    width = max(x, arrow_x + _GAP + 8 + right[1])
    body = []
    for svg, ix, iy, _ in items:
        body.append(svg.replace("<svg ", f"<svg x='{ix:.0f}' y='{iy:.0f}' ", 1))
    for text, mx, my in marks:
        body.append(f"<text x='{mx:.0f}' y='{my + 8:.0f}' font-size='26' text-anchor='middle' "
                    f"font-family='sans-serif'>{text}</text>")
    body.append(f"<path d='M {arrow_x:.0f} {mid:.0f} H {arrow_x + _GAP - 6:.0f}' stroke='black' "
                f"stroke-width='2'/><path d='M {arrow_x + _GAP - 14:.0f} {mid - 6:.0f} L {arrow_x + _GAP - 4:.0f} "
                f"{mid:.0f} L {arrow_x + _GAP - 14:.0f} {mid + 6:.0f}' fill='none' stroke='black' stroke-width='2'/>")
    out = (f"<svg xmlns='http://www.w3.org/2000/svg' version='1.1' width='{width:.0f}px' height='{height:.0f}px' "
           f"viewBox='0 0 {width:.0f} {height:.0f}'>" + "".join(body) + "</svg>")
    return out.encode("utf-8")


def reaction_width(svg: bytes) -> int:
    """The natural width in pixels of a reaction_svg drawing (to show it unscaled)."""
    import re

    m = re.search(rb"width='(\d+)px'", svg)
    return int(m.group(1)) if m else 640


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
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()


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
