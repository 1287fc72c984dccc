"""The radiograph viewer's payload (pxp/data/pixels.py): full stored depth, the stored window, presets."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from pxp.data.pixels import MAX_SIDE, pixel_values, preview_payload, read_header, xray_pixels


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def test_an_8_bit_radiograph_is_sent_exactly() -> None:
    arr = (np.arange(300 * 256) % 256).astype(np.uint8).reshape(300, 256)
    payload = xray_pixels(_png(arr))
    head = read_header(payload)
    assert (head["w"], head["h"], head["deep"], head["center"], head["width"]) == (256, 300, False, 127.5, 255.0)
    assert np.array_equal(pixel_values(payload), arr.astype(np.float64))
    assert head["bits"] == 8 and len(payload) < 300 * 256 + 1024  # a byte per pixel, not two


def test_an_8_bit_radiograph_of_few_levels_is_exact_too() -> None:
    """Grey levels 50..149: each is sent as its distance from the darkest, exactly."""
    arr = (50 + np.arange(120 * 90) % 100).astype(np.uint8).reshape(120, 90)
    head = read_header(payload := xray_pixels(_png(arr)))
    assert (head["bits"], head["lo"], head["hi"]) == (8, 50.0, 149.0)
    assert np.array_equal(pixel_values(payload), arr.astype(np.float64))


def test_16_bit_pixels_keep_their_depth_in_the_dicom_units() -> None:
    """A DICOM import's full-range asset: 16-bit values mapped to raw_min..raw_max (after rescale slope
    and intercept); the viewer windows those values, not an 8-bit copy."""
    arr = (np.arange(200 * 300) * 7 % 65536).astype(np.uint16).reshape(200, 300)
    meta = {"window": {"center": 40.0, "width": 400.0, "raw_min": -1024.0, "raw_max": 3071.0, "units": "HU"}}
    payload = xray_pixels(_png(arr), meta)
    head = read_header(payload)
    assert head["deep"] and head["units"] == "HU" and (head["center"], head["width"]) == (40.0, 400.0)
    assert head["bits"] == 16
    values = pixel_values(payload)
    expected = -1024.0 + arr / 65535.0 * (3071.0 - -1024.0)
    assert np.abs(values - expected).max() < (3071.0 + 1024.0) / 65535.0  # one quantum of 16 bits
    assert len(np.unique(values)) > 4096  # far more than the 256 levels of an 8-bit copy
    names = [p["name"] for p in head["presets"]]
    assert names == ["Default", "Full range", "Lung", "Soft tissue", "Bone"]
    lung, soft, bone = head["presets"][2:]
    assert lung["center"] < soft["center"] < bone["center"]


def test_a_large_film_is_scaled_to_the_longest_side() -> None:
    arr = np.zeros((3000, 2500), dtype=np.uint8)
    head = read_header(payload := xray_pixels(_png(arr)))
    assert max(head["w"], head["h"]) == MAX_SIDE and head["h"] == MAX_SIDE
    assert head["bits"] == 8 and len(payload) < head["w"] * head["h"] + 1024


def test_a_films_preview_is_its_block_means_in_the_same_units() -> None:
    """The preview sent before a film: at most 256 px, each pixel the mean of a block of the film's, in the same
    format, units and window; none for a film no larger."""
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(1000, 1200), dtype=np.uint8)
    arr[0, 0], arr[0, 1] = 0, 255  # the range the film's header gives
    film = xray_pixels(_png(arr))
    small = preview_payload(film)
    assert small is not None and len(small) < len(film) // 20
    head, full = read_header(small), read_header(film)
    k = 5  # ceil(1200 / 256)
    assert (head["w"], head["h"], head["preview"], head["bits"]) == (240, 200, True, 8)
    assert {x: head[x] for x in ("lo", "hi", "center", "width", "presets")} == \
        {x: full[x] for x in ("lo", "hi", "center", "width", "presets")}
    means = arr.astype(np.float64).reshape(200, k, 240, k).mean(axis=(1, 3))
    assert np.abs(pixel_values(small) - means).max() <= 0.5
    deep = (np.arange(600 * 300) % 4096 * 16).astype(np.uint16).reshape(300, 600)
    preview16 = preview_payload(xray_pixels(_png(deep)))
    assert preview16 is not None and read_header(preview16)["bits"] == 16
    assert preview_payload(xray_pixels(_png(arr[:200, :256]))) is None
