"""A radiograph as the browser viewer windows it: its pixel values at full stored depth.

The viewer (pxp/app/viewer.py) applies window/level in the browser, so it needs the pixel values
themselves, not an 8-bit rendering: for a DICOM import, the 16-bit full-range asset after rescale
slope/intercept (in the units of meta["window"]); for any other image, its grey values. The payload
is `PXPW`, a little-endian uint32 header length, a JSON header and then the pixels: for 16-bit data
one uint16 per pixel, quantised over the image's own range (`bits` 16: value = lo + q / 65535 × (hi −
lo)), so it keeps its depth; for an 8-bit image one byte per pixel, its grey level above the darkest
(`bits` 8: value = lo + q), exactly and at half the size. README "The app".
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageOps
from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.data.images import open_image
from pxp.data.render import pixel_units
from pxp.storage.tables import Asset, Instance

MAGIC = b"PXPW"
#: the longest side sent to the browser (a 3000 × 3000 film is scaled to this: 8 MB of uint16)
MAX_SIDE = 2048


def _percentile(arr: np.ndarray, q: float) -> float:
    return float(np.percentile(arr, q))


def presets(units: np.ndarray, *, deep: bool, center: float, width: float,
            stored: Any = None) -> list[dict[str, Any]]:
    """The viewer's presets: the stored default, the full range and, for 16-bit data, the windows the DICOM
    file names (`stored`, e.g. Lung, Soft tissue, Bone) or else lung, soft-tissue and bone windows placed
    on the image's own value distribution (the low, middle and high densities)."""
    lo, hi = float(units.min()), float(units.max())
    out = [{"name": "Default", "center": center, "width": width},
           {"name": "Full range", "center": (lo + hi) / 2, "width": max(hi - lo, 1e-6)}]
    named = [{"name": str(p["name"]), "center": float(p["center"]), "width": float(p["width"])}
             for p in stored or () if isinstance(p, Mapping) and {"name", "center", "width"} <= set(p)]
    if deep and named:
        return out + named
    if deep:
        p1, p25, p50, p90, p99 = (_percentile(units, q) for q in (1, 25, 50, 90, 99))
        span = max(p99 - p1, 1e-6)
        out += [{"name": "Lung", "center": p25, "width": 0.6 * span},
                {"name": "Soft tissue", "center": p50, "width": 0.35 * span},
                {"name": "Bone", "center": p90, "width": 0.3 * span}]
    return out


def xray_pixels(asset_bytes: bytes, meta: Mapping[str, Any] | None = None, *, max_side: int = MAX_SIDE) -> bytes:
    """The viewer's payload for an X-ray asset (ImageRejected for bytes that are not a valid image)."""
    meta = meta or {}
    im = ImageOps.exif_transpose(open_image(asset_bytes, where="X-ray image"))
    deep = im.mode in ("I;16", "I;16B", "I;16L", "I", "F")
    units, invert = pixel_units(im, meta)
    h, w = units.shape
    if max(h, w) > max_side:
        f = max_side / max(h, w)
        small = Image.fromarray(units.astype(np.float32), mode="F").resize(
            (max(1, round(w * f)), max(1, round(h * f))), Image.Resampling.BILINEAR)
        units = np.asarray(small, dtype=np.float64)
        h, w = units.shape
    lo, hi = float(units.min()), float(units.max())
    if not deep and round(hi - np.floor(lo)) <= 255:  # 8-bit grey levels: a byte each (a scaled film rounded)
        lo = float(np.floor(lo))
        q = np.round(units - lo).astype(np.uint8)
        bits = 8
    else:
        q = np.round((units - lo) / (hi - lo if hi > lo else 1.0) * 65535.0).astype("<u2")
        bits = 16
    win = meta.get("window") if isinstance(meta.get("window"), Mapping) else {}
    assert isinstance(win, Mapping)
    center = float(win.get("center", (lo + hi) / 2)) if deep or "center" in win else 127.5
    width = float(win.get("width", hi - lo)) if deep or "width" in win else 255.0
    header = {
        "w": w, "h": h, "lo": lo, "hi": hi, "bits": bits, "deep": deep, "invert": invert, "center": center,
        "width": max(width, 1e-6), "units": str(win.get("units", "")) if deep else "",
        "presets": presets(units, deep=deep, center=center, width=max(width, 1e-6), stored=win.get("presets")),
    }
    head = json.dumps(header).encode()
    head += b" " * ((len(MAGIC) + 4 + len(head)) % 2)  # the pixels start on an even byte
    return MAGIC + struct.pack("<I", len(head)) + head + q.tobytes()


def read_header(payload: bytes) -> dict[str, Any]:
    """The JSON header of a payload (what the browser reads first)."""
    if payload[:4] != MAGIC:
        raise ValueError("not a pxp viewer payload")
    (n,) = struct.unpack("<I", payload[4:8])
    header: dict[str, Any] = json.loads(payload[8:8 + n])
    return header


def pixel_values(payload: bytes) -> np.ndarray:
    """The pixel values in the header's units (what the browser reconstructs), as a (h, w) array."""
    header = read_header(payload)
    (n,) = struct.unpack("<I", payload[4:8])
    if header.get("bits") == 8:
        q8 = np.frombuffer(payload[8 + n:], dtype=np.uint8).reshape(header["h"], header["w"])
        grey: np.ndarray = header["lo"] + q8.astype(np.float64)
        return grey
    q = np.frombuffer(payload[8 + n:], dtype="<u2").reshape(header["h"], header["w"])
    span = header["hi"] - header["lo"] if header["hi"] > header["lo"] else 1.0
    values: np.ndarray = header["lo"] + q.astype(np.float64) / 65535.0 * span
    return values


def instance_pixels(engine: Engine, instance_id: int) -> bytes | None:
    """The viewer's payload of an instance's image: its full-range asset when it has one."""
    with DB(engine) as db:
        inst = db.get(Instance, instance_id)
        if inst is None or inst.asset_sha256 is None:
            return None
        meta = dict(inst.meta or {})
        win = meta.get("window")
        sha = str(win.get("raw_sha256") or inst.asset_sha256) if isinstance(win, dict) else inst.asset_sha256
        asset = db.get(Asset, sha)
        if asset is None:
            return None
        data = asset.data
    return xray_pixels(data, meta)


__all__ = ["MAX_SIDE", "instance_pixels", "pixel_values", "read_header", "xray_pixels"]


#: the longest side of a film's preview (preview_payload): a few tens of kB, drawn while the film itself arrives
PREVIEW_SIDE = 256


def preview_payload(payload: bytes, max_side: int = PREVIEW_SIDE) -> bytes | None:
    """A low-resolution copy of a viewer payload, in the same format (its values, window and presets; the header
    says `preview`), each pixel the mean of a block of the film's: the browser draws it while the film itself
    arrives (docs/annotating.md, Pages). None when the film is no larger."""
    header = read_header(payload)
    (n,) = struct.unpack("<I", payload[4:8])
    w, h = int(header["w"]), int(header["h"])
    k = -(-max(w, h) // max_side)  # the block's side
    if k <= 1:
        return None
    q = np.frombuffer(payload[8 + n:], dtype=np.uint8 if header.get("bits") == 8 else "<u2").reshape(h, w)
    hs, ws = h // k, w // k
    small: np.ndarray = q[:hs * k, :ws * k].reshape(hs, k, ws, k).mean(axis=(1, 3)).round().astype(q.dtype)
    head = json.dumps({**header, "w": ws, "h": hs, "preview": True}).encode()
    head += b" " * ((len(MAGIC) + 4 + len(head)) % 2)
    return bytes(MAGIC + struct.pack("<I", len(head)) + head + small.tobytes())
