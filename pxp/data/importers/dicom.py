"""Import a folder of DICOM images (DESIGN §6).

Each file is read with pydicom and de-identified in memory before anything is kept:
the attributes of the DICOM Basic Application Level Confidentiality Profile
(PS3.15 Annex E, Table E.1-1) are removed, as are every person-name (PN) element,
private tags, overlays and curves. The DICOM file itself is never stored; only a
whitelist of technical attributes goes to the database. Pixels pass through the
modality LUT (rescale) and the first VOI LUT or window; MONOCHROME1 is inverted
for display. Two assets are stored: the 8-bit display image (what agents see) and
a 16-bit full-range image for window/level in the app. A BurnedInAnnotation flag
of YES yields a warning: the pixels themselves may show identifying text.
"""

from __future__ import annotations

import hashlib
import io
import logging
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from sqlalchemy import Engine

from pxp.data.images import MAX_FRAMES, MAX_PIXELS, PreparedImage, png_bytes
from pxp.data.importers.common import (
    ImportProblems,
    ImportResult,
    NewInstance,
    Problems,
    check_split,
)
from pxp.data.importers.deidentify import deidentify
from pxp.data.importers.jpeg_repair import repair_sequential_scans
from pxp.data.importers.reading import read_csv
from pxp.data.importers.stage import store_instances
from pxp.protocols.errors import PxpError

log = logging.getLogger("pxp.dicom")
"""pydicom's warnings about malformed elements go here, one record per warning."""
log.addHandler(logging.NullHandler())  # never printed raw: the CLI shows one summary line, --log keeps them

MAX_DICOM_BYTES = 256 * 1024 * 1024
"""Largest DICOM file accepted (bytes)."""

# the only attributes kept in the database (technical, not identifying)
KEEP = ("Modality", "PhotometricInterpretation", "Rows", "Columns", "BitsStored",
        "BodyPartExamined", "ViewPosition", "ImageLaterality", "Laterality",
        "PixelSpacing", "ImagerPixelSpacing", "SOPClassUID", "BurnedInAnnotation",
        "RescaleSlope", "RescaleIntercept", "WindowCenter", "WindowWidth", "WindowCenterWidthExplanation")

Array = NDArray[np.float64]


class DicomError(PxpError, ValueError):
    """A DICOM file that cannot be read: file and reason, one line."""


def _line(err: BaseException | str) -> str:
    """An exception's message on one line."""
    return " ".join(str(err).split()) or type(err).__name__


def _json(value: Any) -> Any:
    if isinstance(value, (int, float, str)):
        return value
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        return str(value)


def _first(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value[0]) if not isinstance(value, (int, float, str)) else float(value)
    except (TypeError, ValueError, IndexError):
        return None


def _all(value: Any) -> list[float]:
    """Every number of a (possibly multi-valued) element; [] when one is not a number."""
    if value is None:
        return []
    try:
        return [float(v) for v in (value if not isinstance(value, (int, float, str)) else [value])]
    except (TypeError, ValueError):
        return []


def window_presets(ds: Any) -> list[dict[str, Any]]:
    """The windows a multi-valued WindowCenter / WindowWidth lists beyond the first (the default), named by
    WindowCenterWidthExplanation ("LUNG" → "Lung"), in the stored units after rescale."""
    centers, widths = _all(ds.get("WindowCenter")), _all(ds.get("WindowWidth"))
    names = ds.get("WindowCenterWidthExplanation")
    names = [str(n) for n in names] if names is not None and not isinstance(names, str) else [str(names or "")]
    out = []
    for i, (c, w) in enumerate(zip(centers, widths, strict=False)):
        name = " ".join(names[i].split()).capitalize() if i < len(names) and names[i].strip() else f"Window {i + 1}"
        if i and w > 0:
            out.append({"name": name[:40], "center": c, "width": w})
    return out


def _png(arr: NDArray[Any]) -> bytes:
    return png_bytes(Image.fromarray(arr))


def _image(data: bytes, meta: dict[str, Any]) -> PreparedImage:
    im = Image.open(io.BytesIO(data))
    return PreparedImage(data=data, mime="image/png", width=im.width, height=im.height,
                         mode=im.mode, meta=meta)


def _pixels(ds: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(ds.pixel_array)


def dicom_images(ds: Any, where: str, warns: list[str]) -> tuple[PreparedImage, PreparedImage,
                                                                   dict[str, Any]]:
    """The display (8-bit) and full-range (16-bit) images of a de-identified dataset."""
    from pydicom.pixels.processing import apply_modality_lut, apply_voi_lut

    rows, cols = int(ds.get("Rows", 0) or 0), int(ds.get("Columns", 0) or 0)
    frames = int(ds.get("NumberOfFrames", 1) or 1)
    if frames > MAX_FRAMES:
        raise ImportProblems([f"{where}: {frames} frames is more than the {MAX_FRAMES} frame limit "
                              "(a radiograph is one picture)"])
    if rows * cols * frames > MAX_PIXELS:
        raise ImportProblems([f"{where}: {cols}×{rows}×{frames} pixels is more than the "
                              f"{MAX_PIXELS:,} pixel limit"])
    try:
        pixels = _pixels(ds)
    except Exception as err:  # any decoder failure is one line for the user
        ts = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
        name = getattr(ts, "name", str(ts))
        problem = [f"{where}: cannot decode the pixel data ({name}): {_line(err)}"]
        try:
            if not repair_sequential_scans(ds):
                raise ImportProblems(problem) from None
            pixels = _pixels(ds)
        except ImportProblems:
            raise
        except Exception:
            raise ImportProblems(problem) from None
        warns.append(f"{where}: its JPEG scan header broke ITU-T T.81 (spectral selection of a "
                     "sequential image); repaired and decoded")
    photometric = str(ds.get("PhotometricInterpretation", "MONOCHROME2"))
    if frames > 1:
        warns.append(f"{where}: {frames} frames; only the first is imported")
        pixels = pixels[0]
    if pixels.ndim == 3:  # colour: luminance
        pixels = pixels[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
        photometric = "MONOCHROME2"
        values: Array = pixels
    else:
        values = np.asarray(apply_modality_lut(pixels, ds), dtype=np.float64)
    invert = photometric == "MONOCHROME1"
    lo_all, hi_all = float(values.min()), float(values.max())
    center, width = _first(ds.get("WindowCenter")), _first(ds.get("WindowWidth"))
    lut = "VOILUTSequence" in ds and pixels.ndim == 2
    if lut:
        voi = np.asarray(apply_voi_lut(pixels, ds, prefer_lut=True), dtype=np.float64)
        vlo, vhi = float(voi.min()), float(voi.max())
        scaled = (voi - vlo) / ((vhi - vlo) or 1.0)
        center, width = (hi_all + lo_all) / 2, (hi_all - lo_all) or 1.0
    else:
        if center is None or width is None or width <= 0:
            center, width = (hi_all + lo_all) / 2, (hi_all - lo_all) or 1.0
        scaled = np.clip((values - (center - width / 2)) / width, 0.0, 1.0)
    if invert:
        scaled = 1.0 - scaled
    display = np.round(scaled * 255).astype(np.uint8)
    span = (hi_all - lo_all) or 1.0
    raw = np.round((values - lo_all) / span * 65535).astype(np.uint16)
    full = _image(_png(raw), {"format": "PNG", "mode": "I;16", "dicom_full_range": True})
    window = {"center": float(center), "width": float(width), "invert": invert, "lut": lut,
              "raw_sha256": full.sha256, "raw_min": lo_all, "raw_max": hi_all}
    if not lut and (named := window_presets(ds)):
        window["presets"] = named
    shown = _image(_png(display), {"format": "PNG", "mode": "L", "from_dicom": True})
    return shown, full, window


def bad_element(ds: Any) -> str | None:
    """The first IS/DS element whose value is not a number (pydicom keeps it as text)."""
    from pydicom.valuerep import IS, DSdecimal, DSfloat

    for elem in ds:
        if elem.VR not in ("IS", "DS") or elem.value is None or elem.value == "":
            continue
        values = elem.value if elem.VM > 1 else [elem.value]
        for v in values:
            if not isinstance(v, (IS, DSfloat, DSdecimal, int, float)):
                name = elem.keyword or "private element"
                return f"element {name} {elem.tag}: {str(v)!r} is not a valid {elem.VR} value"
    return None


def read_dicom(path: Path, where: str, notes: list[str]) -> Any:
    """Read one file: the dataset, or None if it is not DICOM; pydicom's warnings go to
    `notes`. ValueError naming the file (and element) for a file that cannot be used."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ds = pydicom.dcmread(path)
            bad = bad_element(ds)
        except InvalidDicomError:
            return None
        except Exception as err:  # corrupt files: one line each
            bad = f"corrupt or truncated DICOM ({_line(err)})"
            ds = None
        finally:
            notes += [f"{where}: {_line(w.message)}" for w in caught]
    if bad:
        raise DicomError(f"{where}: {bad}")
    return ds


def _labels_file(path: Path) -> dict[str, tuple[int, dict[str, str]]]:
    """The labels CSV by file (relative, forward slashes) with each row's line; a file listed
    twice is refused naming both lines."""
    rows = read_csv(path, required=("file", "label"), label="labels CSV")
    out: dict[str, tuple[int, dict[str, str]]] = {}
    problems: list[str] = Problems()
    for line, r in rows:
        f = r["file"].strip().replace("\\", "/")
        if not r["label"].strip():  # a labelled case needs its label: the proxy has no answer without one
            problems.append(f"{path.name}:{line}: empty label for file {f!r}; fill it in, or import the "
                            "folder without --labels for unlabelled cases")
        elif f in out:
            problems.append(f"{path.name}:{line}: file {f!r} is also on line {out[f][0]}; list each file once")
        else:
            out[f] = (line, r)
    if problems:
        raise ImportProblems(problems)
    return out


def _dicom_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                  and p.name.upper() != "DICOMDIR")


def import_dicom(
    engine: Engine,
    folder: Path,
    *,
    name: str | None = None,
    label: str | None = None,
    labels: Path | None = None,
    report: str = "",
    split: str | None = None,
    task: str = "rad",
    skip_bad: bool = False,
    source: str | None = None,
) -> ImportResult:
    """Import every DICOM image under `folder` as RAD instances (de-identified first).

    Labels: `label` for all files, or `labels`, a CSV with columns file,label and
    optional report and split (file relative to the folder). Without either the
    instances are unlabelled (for live sessions with a human in the browser).
    Given a CSV file instead of a folder, it is the labels file and its folder is
    imported; given a zip, it is unpacked safely (pxp.data.importers.zips, as for uploads) and
    its files imported. The dataset name defaults to the folder's name. A file that cannot be
    used (corrupt, an invalid element, undecodable pixels) is a problem, or with
    `skip_bad` a warning naming it while the others are imported. pydicom's warnings
    go to the `pxp.dicom` log, with one summary line among the result's warnings.
    """
    folder = Path(folder)
    if label is not None and labels is not None:
        raise ImportProblems(["give --label (one label for every image) or --labels (a CSV), not both"])
    if folder.is_file() and folder.suffix.lower() == ".zip":
        import tempfile

        from pxp.data.importers.zips import extract_zip

        with tempfile.TemporaryDirectory(prefix="pxp-dicom-") as tmp:
            extract_zip(folder, Path(tmp), name=folder.name)
            return import_dicom(engine, Path(tmp), name=name or folder.stem, label=label,
                                labels=labels, report=report, split=split, task=task,
                                skip_bad=skip_bad, source=folder.name)
    if folder.is_file() and folder.suffix.lower() == ".csv" and labels is None:
        folder, labels = folder.parent, folder
    if not folder.is_dir():
        raise ImportProblems([f"{folder}: not a folder"])
    problems: list[str] = Problems()
    warns: list[str] = []
    fixed_split = check_split(split, "--split", problems)
    table = _labels_file(labels) if labels is not None else {}
    seen: dict[str, str] = {}
    used_rows: set[str] = set()
    found = made = 0
    names: list[str] = []
    bad: list[str] = []
    notes: list[str] = []
    skip = Path(labels).resolve() if labels is not None else None

    def items() -> Iterator[NewInstance]:
        """The files as instances, one at a time (stored in batches); the problems and warnings
        of the whole folder noted at the end."""
        nonlocal found, made
        for path in _dicom_files(folder):
            if skip is not None and path.resolve() == skip:
                continue
            rel = path.relative_to(folder).as_posix()
            used_rows.add(rel)
            where = rel
            if path.stat().st_size > MAX_DICOM_BYTES:
                bad.append(f"{where}: larger than the {MAX_DICOM_BYTES // (1024 * 1024)} MB limit")
                continue
            try:
                ds = read_dicom(path, where, notes)
            except ValueError as err:
                found += 1
                bad.append(str(err))
                continue
            if ds is None:
                warns.append(f"{where}: not a DICOM file; skipped")
                continue
            found += 1
            if "PixelData" not in ds:
                bad.append(f"{where}: no pixel data")
                continue
            uid = str(ds.get("SOPInstanceUID", "")) or hashlib.sha256(path.read_bytes()).hexdigest()
            burned = str(ds.get("BurnedInAnnotation", "")).upper() == "YES"
            photometric = str(ds.get("PhotometricInterpretation", ""))
            deidentify(ds)
            try:
                shown, full, window = dicom_images(ds, where, warns)
            except ImportProblems as err:
                bad.extend(err.problems)
                continue
            if burned:
                warns.append(f"{where}: BurnedInAnnotation is YES: the pixels may show identifying "
                             "text; review the image before sharing it")
            key = "dcm-" + hashlib.sha256(uid.encode()).hexdigest()[:20]
            if key in seen:
                warns.append(f"{where}: same image (SOP instance) as {seen[key]}; skipped")
                continue
            seen[key] = where
            row: Mapping[str, str] = table.get(rel, (0, {}))[1]
            if labels is not None and not row:
                problems.append(f"{where}: no row for this file in {Path(labels).name}")
                continue
            lab = (row.get("label") or label or "").strip()
            text = (row.get("report") or report or "").strip()
            row_split = fixed_split if split else check_split(row.get("split"), where, problems)
            dicom_meta = {k: _json(ds.get(k)) for k in KEEP if ds.get(k) is not None}
            dicom_meta["PhotometricInterpretation"] = photometric
            meta: dict[str, Any] = {"window": window, "dicom": dicom_meta}
            if burned:
                meta["burned_in_annotation"] = True
            if lab and lab not in names:
                names.append(lab)
            made += 1
            yield NewInstance(key=key, split=row_split, image=shown, label=lab,
                              reference_prediction=lab, reference_explanation=text,
                              meta=meta, extra_assets=[full])
        if labels is not None:
            problems.extend(f"{Path(labels).name}:{line}: no file {f!r} in {source or folder.name}; fix the "
                            "path or drop the row" for f, (line, _) in table.items() if f not in used_rows)
        if not found and not problems:
            problems.append(f"{source or folder}: no DICOM files found")
        if skip_bad:
            warns.extend(f"{b} (skipped)" for b in bad)
            if bad and not made and not problems:
                problems.append(f"{folder}: no readable DICOM files")
        else:
            problems.extend(bad)
        for note in notes:
            log.warning(note)
        if notes:
            files = len({n.split(": ", 1)[0] for n in notes})
            warns.append(f"{len(notes)} pydicom warning(s) about {files} file(s) went to the "
                         "'pxp.dicom' log (--log FILE keeps them)")
    return store_instances(
        engine, name=name or folder.resolve().name, task=task, items=items(), warnings=warns,
        problems=problems,
        description=f"de-identified DICOM images from {folder.name}",
        source=source or folder.name, config={"labels": names},
    )
