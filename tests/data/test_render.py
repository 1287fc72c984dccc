"""Rendering helpers: molecules, reaction schemes, properties, X-ray display."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from pxp.data.chem import InvalidSmiles
from pxp.data.images import ImageRejected
from pxp.data.render import molecule_properties, molecule_svg, reaction_parts, xray_display_png


def parse_svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag.endswith("svg")
    return root


def test_molecule_svg_is_valid_svg_of_the_given_size() -> None:
    svg = molecule_svg("CC(=O)Nc1ccc(O)cc1", size=(300, 200))
    root = parse_svg(svg)
    assert root.get("width") == "300px" and root.get("height") == "200px"
    assert len(root) > 5  # paths for bonds and atoms
    # two fragments are drawn together
    parse_svg(molecule_svg("CCO.c1ccccc1"))


def test_reaction_parts_draw_reactants_to_target() -> None:
    """The first reactant, "+ reactant", "→ target": one SVG each, of one height, so that they wrap in
    the page's column like words with their marks in line."""
    parts = reaction_parts("CC(=O)OC(C)=O.Nc1ccc(O)cc1", "CC(=O)Nc1ccc(O)cc1")
    roots = [parse_svg(svg.encode()) for svg, _ in parts]
    assert len(roots) == 3
    assert len({r.get("height") for r in roots}) == 1
    assert [float(r.get("width", "").removesuffix("px")) for r in roots] == [w for _, w in parts]
    marks = ["".join(e.text or "" for e in r.iter() if e.tag.endswith("text")) for r in roots]
    assert marks == ["", "+", ""] and any(e.tag.endswith("path") for e in roots[2])  # the arrow is a path
    assert parts[2][0] != molecule_svg("CC(=O)Nc1ccc(O)cc1").decode()


def _label_height(svg: str, atom: int) -> float:
    """The height in pixels of an atom's label (RDKit draws its glyphs as paths of class atom-N)."""
    ys: list[float] = []
    for d in re.findall(rf"<path class='atom-{atom}' d='([^']*)'", svg):
        ys += [float(y) for y in re.findall(r"-?[\d.]+", d)[1::2]]
    assert ys, f"no label drawn for atom {atom}"
    return max(ys) - min(ys)


def test_reaction_molecules_keep_their_legible_scale() -> None:
    """Atom labels stay as large as body text: every molecule of a reaction is drawn at the fixed bond
    length whatever the number of reactants (RDKit's reaction drawer shrank them to fit its canvas)."""
    target = "CC(=O)Nc1ccc(O)cc1"
    small = reaction_parts("CC(=O)O.Nc1ccc(O)cc1", target)
    large = reaction_parts("CC(=O)OC(C)=O.Nc1ccc(O)cc1.CCCCCCCCCCCCCCCCCC", target)
    assert small[-1] == large[-1] and small[1][1] == large[1][1]  # the target and the shared reactant
    assert 200 < small[-1][1] <= 640  # shown at its natural size, not stretched to a fixed canvas


def test_a_molecule_wider_than_the_column_is_drawn_with_shorter_bonds() -> None:
    """No piece is wider than max_width (the column at a 1280 px window): a long chain is drawn with
    shorter bonds, not scaled as a picture (which would shrink its labels)."""
    wide = "CCCCCCCCCCCCC(O)=O"
    natural = reaction_parts(wide, "CCO", max_width=2000)
    fitted = reaction_parts(wide, "CCO", max_width=260)
    assert natural[0][1] > 350 and fitted[0][1] <= 260
    assert all(w <= 260 for _, w in fitted)
    for atom in (13, 14):  # the acid's O and OH: their labels as large as at the natural size
        assert abs(_label_height(fitted[0][0], atom) - _label_height(natural[0][0], atom)) < 0.5


@pytest.mark.parametrize("call", [
    lambda: molecule_svg("C1CC"),
    lambda: molecule_svg(""),
    lambda: reaction_parts("CCO.Xx", "CCO"),
    lambda: reaction_parts("CCO", "c1ccccc1("),
    lambda: reaction_parts(" ", "CCO"),
    lambda: molecule_properties("not a molecule"),
])
def test_invalid_smiles_is_a_clear_error(call: object) -> None:
    with pytest.raises(InvalidSmiles) as info:
        call()  # type: ignore[operator]
    assert "SMILES" in str(info.value)


def test_properties_of_aspirin_and_paracetamol() -> None:
    assert molecule_properties("CC(=O)Oc1ccccc1C(=O)O") == {
        "formula": "C9H8O4", "mw": 180.16, "aromatic_rings": 1, "hbd": 1, "hba": 3,
        "heavy_atoms": 13,
    }
    p = molecule_properties("CC(=O)Nc1ccc(O)cc1")
    assert p["formula"] == "C8H9NO2" and p["mw"] == 151.16 and p["hbd"] == 2


def _png(arr: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr, mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def _pixels(png: bytes) -> np.ndarray:
    im = Image.open(io.BytesIO(png))
    assert im.format == "PNG" and im.mode == "L"
    return np.asarray(im)


def test_xray_display_plain_8bit_is_shown_as_stored() -> None:
    ramp = np.tile(np.arange(256, dtype=np.uint8), (4, 1))
    assert np.array_equal(_pixels(xray_display_png(_png(ramp), {})), ramp)
    rgb = np.stack([ramp] * 3, axis=-1)
    assert np.array_equal(_pixels(xray_display_png(_png(rgb))), ramp)


def test_window_level_on_a_dicom_derived_8bit_asset() -> None:
    # the asset maps units [0, 1000] (centre 500, width 1000) to 0..255
    ramp = np.tile(np.arange(256, dtype=np.uint8), (4, 1))
    meta = {"window": {"center": 500.0, "width": 1000.0}}
    out = _pixels(xray_display_png(_png(ramp), meta, window=500, level=500))
    # units 250..750 now span the full range: value 64 (≈251 units) is near black
    assert out[0, 0] == 0 and out[0, 255] == 255
    assert out[0, 64] <= 2 and out[0, 191] >= 253
    assert 120 <= out[0, 128] <= 135


def test_window_level_on_a_16bit_full_range_asset_with_inversion() -> None:
    raw = np.tile(np.linspace(0, 65535, 512).astype(np.uint16), (2, 1))
    meta = {"window": {"center": 2048.0, "width": 4096.0, "raw_min": 0.0, "raw_max": 4095.0,
                       "invert": True}}
    default = _pixels(xray_display_png(_png(raw), meta))
    assert default[0, 0] == 255 and default[0, -1] == 0  # MONOCHROME1: inverted
    narrow = _pixels(xray_display_png(_png(raw), meta, window=1000, level=1000))
    assert narrow[0, 0] == 255 and narrow[0, 256] == 0  # 2048 units is past the window
    assert (narrow[0, :200] > 0).sum() > 100


def test_xray_display_refuses_garbage() -> None:
    with pytest.raises(ImageRejected):
        xray_display_png(b"not an image")
