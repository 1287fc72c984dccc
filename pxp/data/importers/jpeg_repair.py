"""Repair of a known encoder quirk in sequential JPEG (DICOM JPEG Baseline / Extended).

Some encoders (pydicom's own corpus has one: JPEG-lossy.dcm, a 12-bit JPEG Extended
bone scan) write the start-of-scan header of a sequential DCT image with spectral
selection 0..0 instead of 0..63 (ITU-T T.81 B.2.3: for sequential DCT, Ss = 0, Se = 63,
Ah = Al = 0). Strict decoders (libjpeg) then refuse the whole image; lenient ones
ignore these fields. `repair_sequential_scans` rewrites just those bytes so the
image decodes, and nothing else.
"""

from __future__ import annotations

from typing import Any

_SEQUENTIAL_SOF = {0xC0, 0xC1}  # baseline and extended sequential DCT (Huffman)
_JPEG_SEQUENTIAL_SYNTAXES = {"1.2.840.10008.1.2.4.50", "1.2.840.10008.1.2.4.51"}


def _repair_frame(frame: bytes) -> bytes | None:
    """The frame with its sequential scan headers set to Ss=0, Se=63, Ah=Al=0, or None if none needed it."""
    b = bytearray(frame)
    if b[:2] != b"\xff\xd8":
        return None
    i, sequential, changed = 2, False, False
    while i + 4 <= len(b) and b[i] == 0xFF:
        marker = b[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = b[i + 2] << 8 | b[i + 3]
        if marker in _SEQUENTIAL_SOF:
            sequential = True
        elif marker == 0xDA:  # start of scan: the entropy-coded data follows
            if not sequential:
                return None
            p = i + 4 + 1 + 2 * b[i + 4]
            if p + 2 < len(b) and (b[p], b[p + 1], b[p + 2]) != (0, 63, 0):
                b[p], b[p + 1], b[p + 2] = 0, 63, 0
                changed = True
            break  # one scan in sequential mode
        i += 2 + length
    return bytes(b) if changed else None


def repair_sequential_scans(ds: Any) -> bool:
    """Rewrite the PixelData of a JPEG Baseline/Extended dataset whose scan headers break T.81
    B.2.3 (see the module docstring); True when something was repaired."""
    from pydicom.encaps import encapsulate, generate_frames

    ts = str(getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", ""))
    if ts not in _JPEG_SEQUENTIAL_SYNTAXES or "PixelData" not in ds:
        return False
    n = int(ds.get("NumberOfFrames", 1) or 1)
    frames = list(generate_frames(ds.PixelData, number_of_frames=n))
    repaired = [_repair_frame(f) for f in frames]
    if not any(r is not None for r in repaired):
        return False
    ds.PixelData = encapsulate([r if r is not None else f for r, f in zip(repaired, frames, strict=True)])
    return True
