"""Rendering helpers: molecules, reaction schemes, properties, X-ray display."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from pxp.data.chem import InvalidSmiles
from pxp.data.images import ImageRejected
from pxp.data.render import molecule_properties, molecule_svg, reaction_svg, xray_display_png


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


def test_reaction_svg_draws_reactants_to_target() -> None:
    one = reaction_svg("CC(=O)OC(C)=O.Nc1ccc(O)cc1", "CC(=O)Nc1ccc(O)cc1")
    root = parse_svg(one)
    assert len(list(root.iter())) > 10
    assert one != molecule_svg("CC(=O)Nc1ccc(O)cc1")


def test_reaction_molecules_keep_their_legible_scale() -> None:
    """Atom labels stay as large as body text: every molecule of a reaction is drawn at the fixed bond
    length whatever the number of reactants (RDKit's reaction drawer shrank them to fit its canvas)."""
    target = "CC(=O)Nc1ccc(O)cc1"

    def sizes(svg: bytes) -> list[tuple[str, str]]:
        return [(e.get("width", ""), e.get("height", "")) for e in parse_svg(svg) if e.tag.endswith("svg")]

    small = sizes(reaction_svg("CC(=O)O.Nc1ccc(O)cc1", target))
    large = sizes(reaction_svg("CC(=O)OC(C)=O.Nc1ccc(O)cc1.CCCCCCCCCCCCCCCCCC", target))
    assert small[-1] == large[-1] and small[1] == large[1]  # the target and the shared reactant: same size
    alone = parse_svg(reaction_svg("Nc1ccc(O)cc1", target))
    width = float(alone.get("width", "0").removesuffix("px"))
    assert 300 < width <= 640  # shown at its natural size, not stretched to a fixed canvas


@pytest.mark.parametrize("call", [
    lambda: molecule_svg("C1CC"),
    lambda: molecule_svg(""),
    lambda: reaction_svg("CCO.Xx", "CCO"),
    lambda: reaction_svg("CCO", "c1ccccc1("),
    lambda: reaction_svg(" ", "CCO"),
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
