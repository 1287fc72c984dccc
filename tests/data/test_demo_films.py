"""The demo films (pxp.data.demo.films; docs/annotating.md, Pages): 2048-px 12-bit DICOM chest films made by pxp,
deterministic, with windowing tags that the DICOM importer turns into the viewer's Lung, Soft tissue and Bone
presets."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pydicom
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.demo.films import BITS, FILM_SIZE, WINDOWS, film_values, write_film
from pxp.data.demo.phantoms import report
from pxp.data.importers.dicom import import_dicom
from pxp.data.pixels import instance_pixels, pixel_values, read_header
from pxp.storage.tables import Instance


def make_film(folder: Path, finding: str = "Pneumothorax", seed: int = 11) -> np.ndarray:
    """One film and its labels file in `folder`, as `pxp demo --films` writes them; its stored values."""
    values, facts = film_values(finding, seed)
    write_film(folder / "film.dcm", values, uid_seed=f"test-{seed}")
    with (folder / "labels.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["file", "label", "report", "split"],
                                 ["film.dcm", finding, report(finding, facts), "test"]])
    return values


def test_a_film_is_made_not_downloaded_the_same_every_time(tmp_path: Path) -> None:
    values = make_film(tmp_path)
    again, _ = film_values("Pneumothorax", 11)
    assert np.array_equal(values, again)
    assert values.shape == (FILM_SIZE, FILM_SIZE) and values.dtype == np.uint16 and FILM_SIZE >= 2000
    assert int(values.max()) <= 2**BITS - 1 and len(np.unique(values)) > 2000  # a radiograph's range, not 8 bits
    ds = pydicom.dcmread(tmp_path / "film.dcm")
    assert ds.file_meta.TransferSyntaxUID == pydicom.uid.DeflatedExplicitVRLittleEndian  # compressed
    assert (ds.BitsStored, ds.Rows, ds.PhotometricInterpretation) == (12, FILM_SIZE, "MONOCHROME2")
    assert [float(c) for c in ds.WindowCenter] == [c for _, c, _ in WINDOWS]
    assert list(ds.WindowCenterWidthExplanation) == ["DEFAULT", "LUNG", "SOFT TISSUE", "BONE"]
    assert np.array_equal(ds.pixel_array, values)


def test_imported_films_offer_the_lung_soft_tissue_and_bone_windows(engine: Engine, tmp_path: Path) -> None:
    values = make_film(tmp_path)
    import_dicom(engine, tmp_path / "labels.csv", name="films")
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
    payload = instance_pixels(engine, inst.id or 0)
    assert payload is not None
    head = read_header(payload)
    assert (head["w"], head["bits"], head["deep"]) == (FILM_SIZE, 16, True)
    assert (head["center"], head["width"]) == WINDOWS[0][1:]  # the file's default window
    assert [(p["name"], p["center"], p["width"]) for p in head["presets"][2:]] == [
        ("Lung", 1500.0, 1400.0), ("Soft tissue", 3000.0, 1000.0), ("Bone", 3450.0, 700.0)]
    # the browser gets the stored values back (16-bit quantised over the film's own range)
    back = pixel_values(payload)
    assert np.abs(back - values).max() <= (values.max() - values.min()) / 65535 + 1e-6
    # the windows fit the anatomy: the lung field in the lung window, the heart in soft tissue, the spine in bone
    lung, heart, spine = back[960, 640], back[1340, 1080], back[300, 1024]
    assert abs(lung - 1500) < 700 and abs(heart - 3000) < 500 and abs(spine - 3450) < 350, (lung, heart, spine)
