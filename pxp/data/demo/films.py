"""Demo chest films with a radiograph's range (docs/annotating.md, Pages): the phantoms of
pxp.data.demo.phantoms as 12-bit DICOM files of 2048 × 2048 pixels with windowing tags.

Made, not downloaded, and not committed: `pxp demo` (pxp.running.pxp.controlled.demo) writes them to a
temporary folder, deterministically from a seed, and imports them through the DICOM importer users run
(de-identification, the 8-bit display image and the 16-bit full-range one). A film is the phantom drawn
at DRAW_SIZE, enlarged to FILM_SIZE with fine detector noise added at full size, stored as 12-bit values
(MONOCHROME2: dense is bright) with WindowCenter / WindowWidth for a default window and the lung,
soft-tissue and bone windows (WindowCenterWidthExplanation names them), and "SYNTHETIC" burned in.
The file is deflate-compressed (Deflated Explicit VR Little Endian).
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFont

from pxp.data.demo.phantoms import FINDINGS, SHORT, phantom_image, report

FILM_SIZE = 2048
DRAW_SIZE = 512
BITS = 12
#: stored value = OFFSET + SPAN × grey (grey 0 black … 1 white), within 0 … 4095
OFFSET, SPAN = 200, 3700
#: the windows in stored values, as WindowCenterWidthExplanation names them: the default first; lung
#: (air-filled lung and its vessels), soft tissue (mediastinum, heart, the fluid of an effusion), bone
WINDOWS: tuple[tuple[str, float, float], ...] = (
    ("DEFAULT", 2200.0, 3900.0), ("LUNG", 1500.0, 1400.0), ("SOFT TISSUE", 3000.0, 1000.0),
    ("BONE", 3450.0, 700.0),
)
SEED = 20260
DX_STORAGE = "1.2.840.10008.5.1.4.1.1.1.1"  # Digital X-Ray Image Storage - For Presentation


def film_values(finding: str, seed: int, size: int = FILM_SIZE) -> tuple[NDArray[np.uint16], dict[str, Any]]:
    """The film's stored 12-bit values (size × size) and the facts its report states."""
    grey, facts = phantom_image(finding, seed, DRAW_SIZE)
    big = np.asarray(Image.fromarray(grey.astype(np.float32), mode="F").resize((size, size),
                                                                               Image.Resampling.BICUBIC))
    rng = np.random.default_rng(seed)
    noisy = big + rng.normal(0.0, 0.006, big.shape).astype(np.float32)  # quantum noise, finer than a phantom pixel
    values = np.clip(np.round(OFFSET + SPAN * noisy), 0, 2**BITS - 1).astype(np.uint16)
    _burn(values, size)
    return values, facts


def _burn(values: NDArray[np.uint16], size: int) -> None:
    """Burn "R" and "SYNTHETIC" into the film (white, at the top and bottom left), as the phantoms carry."""
    scale = max(1, size // 256)
    mark = Image.new("L", (256, 256), 0)
    draw = ImageDraw.Draw(mark)
    font = ImageFont.load_default_imagefont()
    draw.text((10, 10), "R", fill=255, font=font)
    draw.text((10, 238), "SYNTHETIC", fill=255, font=font)
    big = np.asarray(mark.resize((256 * scale, 256 * scale), Image.Resampling.NEAREST))[:size, :size] > 0
    values[big] = 2**BITS - 1


def write_film(path: Path, values: NDArray[np.uint16], *, uid_seed: str) -> None:
    """Write the film as a deflated DICOM file (Digital X-ray) with its windowing tags."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import UID, DeflatedExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = UID(DX_STORAGE)
    uid = generate_uid(entropy_srcs=[uid_seed])  # deterministic
    meta.MediaStorageSOPInstanceUID = uid
    meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = DX_STORAGE, uid
    ds.Modality, ds.BodyPartExamined, ds.ViewPosition = "DX", "CHEST", "PA"
    ds.PatientName, ds.PatientID = "SYNTHETIC^PHANTOM", "PXP-DEMO"
    ds.BurnedInAnnotation = "NO"  # the burned-in text is "R" and "SYNTHETIC", nothing identifying
    ds.Rows, ds.Columns = values.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, BITS, BITS - 1, 0
    ds.RescaleIntercept, ds.RescaleSlope, ds.RescaleType = "0", "1", "US"
    ds.WindowCenter = [f"{c:g}" for _, c, _ in WINDOWS]
    ds.WindowWidth = [f"{w:g}" for _, _, w in WINDOWS]
    ds.WindowCenterWidthExplanation = [name for name, _, _ in WINDOWS]
    ds.PixelData = values.astype("<u2").tobytes()
    import pydicom

    # a DICOM file with its preamble and file meta: pydicom 3 names it enforce_file_format, 2.x write_like_original
    ds.save_as(path, **({"enforce_file_format": True} if int(pydicom.__version__.split(".")[0]) >= 3
                        else {"write_like_original": False}))


def write_films(out: Path, per_finding: int = 1) -> Path:
    """Write the demo films (one per finding, by default) and their labels CSV (file, label, report, split);
    returns the CSV's path."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n, finding in enumerate([f for _ in range(per_finding) for f in FINDINGS], start=1):
        seed = SEED * 1000 + n
        values, facts = film_values(finding, seed)
        name = f"film_{n:02d}_{SHORT[finding].lower()}.dcm"
        write_film(out / name, values, uid_seed=hashlib.sha256(f"pxp-film|{seed}".encode()).hexdigest())
        rows.append({"file": name, "label": finding, "report": report(finding, facts), "split": "test"})
    labels = out / "labels.csv"
    with labels.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["file", "label", "report", "split"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return labels
