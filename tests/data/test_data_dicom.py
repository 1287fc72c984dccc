"""DICOM import: de-identification, modality/VOI LUT, MONOCHROME1, burned-in warning."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.dicom import import_dicom
from pxp.data.render import instance_display_png
from pxp.storage.tables import Asset, Instance
from pxp.storage.tables import Dataset as DatasetRow

DX = "1.2.840.10008.5.1.4.1.1.1.1"  # Digital X-Ray Image Storage - For Presentation
IDENTIFYING = ("Doe", "19700101", "MRN-4711", "General Hospital", "Dr Who", "secret note")


def ramp(rows: int = 32, cols: int = 64) -> np.ndarray:
    return np.tile(np.linspace(0, 4095, cols).astype(np.uint16), (rows, 1))


def make_dicom(path: Path, *, photometric: str = "MONOCHROME2", burned: bool = False,
               window: tuple[float, float] | None = (2048, 4096), intercept: float = 0,
               pixels: np.ndarray | None = None) -> str:
    arr = ramp() if pixels is None else pixels
    uid = generate_uid()
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = DX
    meta.MediaStorageSOPInstanceUID = uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = DX
    ds.SOPInstanceUID = uid
    ds.StudyInstanceUID = generate_uid()
    ds.PatientName = "Doe^Jane"
    ds.PatientBirthDate = "19700101"
    ds.PatientID = "MRN-4711"
    ds.InstitutionName = "General Hospital"
    ds.ReferringPhysicianName = "Dr Who"
    ds.Modality = "DX"
    ds.BodyPartExamined = "CHEST"
    ds.Rows, ds.Columns = arr.shape
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = photometric
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.RescaleSlope, ds.RescaleIntercept = 1, intercept
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    if burned:
        ds.BurnedInAnnotation = "YES"
    ds.add_new(0x00090010, "LO", "ACME")
    ds.add_new(0x00091001, "LO", "secret note")
    ds.PixelData = arr.astype(np.uint16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return uid


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """A folder for the DICOM files (tmp_path also holds the test database)."""
    folder = tmp_path / "in"
    folder.mkdir()
    return folder


def display(engine: Engine, key_part: str | None = None) -> list[np.ndarray]:
    with DB(engine) as db:
        out = []
        for inst in db.exec(select(Instance).order_by(Instance.ordinal)):
            asset = db.get(Asset, inst.asset_sha256)
            assert asset is not None
            out.append(np.asarray(Image.open(io.BytesIO(asset.data))))
        return out


def test_identifying_tags_are_not_stored(engine: Engine, src: Path) -> None:
    path = src / "img.dcm"
    uid = make_dicom(path)
    assert b"Doe^Jane" in path.read_bytes()
    res = import_dicom(engine, src, name="dcm", label="Pneumothorax", report="Pleural line.")
    assert res.added == 1 and res.images == 2
    with DB(engine) as db:
        rows = [r.model_dump() for r in db.exec(select(Instance))]
        rows += [r.model_dump() for r in db.exec(select(DatasetRow))]
        assets = list(db.exec(select(Asset)))
    text = json.dumps(rows, default=str) + json.dumps(
        [a.meta for a in assets]) + "".join(a.data.decode("latin-1") for a in assets)
    for value in (*IDENTIFYING, uid):
        assert value not in text, f"{value!r} was stored"
    inst = rows[0]
    assert inst["label"] == "Pneumothorax" and inst["reference_explanation"] == "Pleural line."
    assert inst["meta"]["dicom"]["Modality"] == "DX"
    assert inst["meta"]["dicom"]["BodyPartExamined"] == "CHEST"
    assert "burned_in_annotation" not in inst["meta"] and res.warnings == []


def test_voi_window_and_monochrome1_inversion(engine: Engine, src: Path) -> None:
    (src / "a").mkdir()
    (src / "b").mkdir()
    make_dicom(src / "a" / "m2.dcm", photometric="MONOCHROME2", window=(2048, 4096))
    make_dicom(src / "b" / "m1.dcm", photometric="MONOCHROME1", window=(2048, 4096))
    import_dicom(engine, src, name="dcm", label="Cardiomegaly")
    m2, m1 = display(engine)
    assert m2[0, 0] < 5 and m2[0, -1] > 250  # higher values brighter
    assert m1[0, 0] > 250 and m1[0, -1] < 5  # MONOCHROME1: inverted
    assert np.all(np.diff(m2[0].astype(int)) >= 0)


def test_narrow_window_and_rescale(engine: Engine, src: Path) -> None:
    # stored 0..4095 with intercept -1024: units -1024..3071; window 0 ± 200
    make_dicom(src / "ct.dcm", window=(0, 400), intercept=-1024)
    res = import_dicom(engine, src, name="dcm")
    (shown,) = display(engine)
    units = np.linspace(0, 4095, 64) - 1024
    assert np.all(shown[0][units < -200] == 0) and np.all(shown[0][units > 200] == 255)
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
        win = inst.meta["window"]
        assert (win["raw_min"], win["raw_max"]) == (-1024.0, 3071.0)
        assert (win["center"], win["width"]) == (0.0, 400.0)
        assert db.get(Asset, win["raw_sha256"]) is not None and inst.label == ""
        iid = inst.id or 0
    assert res.added == 1
    wide = np.asarray(Image.open(io.BytesIO(
        instance_display_png(engine, iid, window=4096, level=1024) or b"")))
    assert wide[0, 0] < 5 and wide[0, -1] > 250 and 100 < wide[0, 32] < 160


def test_burned_in_annotation_warns(engine: Engine, src: Path) -> None:
    make_dicom(src / "burned.dcm", burned=True)
    res = import_dicom(engine, src, name="dcm", label="Pneumonia")
    assert len(res.warnings) == 1
    assert res.warnings[0].startswith("burned.dcm: BurnedInAnnotation is YES")
    with DB(engine) as db:
        assert db.exec(select(Instance)).one().meta["burned_in_annotation"] is True


def test_reimport_is_idempotent_and_labels_csv(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "dcm"
    folder.mkdir()
    make_dicom(folder / "x.dcm")
    make_dicom(folder / "y.dcm")
    (folder / "notes.txt").write_text("not dicom")
    labels = tmp_path / "labels.csv"
    labels.write_text("file,label,report,split\nx.dcm,Atelectasis,Volume loss.,train\n"
                      "y.dcm,Pneumonia,Consolidation.,test\n")
    res = import_dicom(engine, folder, name="dcm", labels=labels)
    assert res.added == 2 and res.warnings == ["notes.txt: not a DICOM file; skipped"]
    again = import_dicom(engine, folder, name="dcm", labels=labels)
    assert (again.added, again.unchanged, again.assets_added) == (0, 2, 0)
    with DB(engine) as db:
        got = {(i.label, i.split) for i in db.exec(select(Instance))}
        ds = db.exec(select(DatasetRow)).one()
    assert got == {("Atelectasis", "train"), ("Pneumonia", "test")}
    assert ds.config["labels"] == ["Atelectasis", "Pneumonia"] and ds.task == "rad"


def test_refusals_write_nothing(engine: Engine, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImportProblems, match="no DICOM files found"):
        import_dicom(engine, empty, name="dcm")
    folder = tmp_path / "dcm"
    folder.mkdir()
    make_dicom(folder / "good.dcm")
    data = (tmp_path / "dcm" / "good.dcm").read_bytes()
    (folder / "cut.dcm").write_bytes(data[: len(data) - 2000])
    labels = tmp_path / "labels.csv"
    labels.write_text("file,label\nother.dcm,Pneumonia\n")
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, folder, name="dcm", labels=labels)
    assert any(p.startswith("cut.dcm:") for p in info.value.problems)
    assert "good.dcm: no row for this file in labels.csv" in info.value.problems
    labels.write_text("file,label\ngood.dcm,\n")  # an empty label is never silent
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, folder, name="dcm", labels=labels)
    assert info.value.problems == ["labels.csv:2: empty label for file 'good.dcm'; fill it in, or import the "
                                   "folder without --labels for unlabelled cases"]
    with DB(engine) as db:
        assert db.exec(select(Instance)).first() is None
        assert db.exec(select(Asset)).first() is None


def test_labels_csv_as_the_path_names_its_folder(engine: Engine, src: Path) -> None:
    make_dicom(src / "a.dcm")
    (src / "labels.csv").write_text("file,label\na.dcm,Pneumothorax\n")
    res = import_dicom(engine, src / "labels.csv")
    assert (res.dataset, res.added, res.warnings) == ("in", 1, [])
    assert display(engine)[0].shape == (32, 64)


def test_undecodable_compressed_pixels_are_one_line(engine: Engine, src: Path) -> None:
    import pydicom
    from pydicom.encaps import encapsulate
    from pydicom.uid import JPEG2000Lossless

    make_dicom(src / "j.dcm")
    ds = pydicom.dcmread(src / "j.dcm")
    ds.file_meta.TransferSyntaxUID = JPEG2000Lossless
    ds.PixelData = encapsulate([b"\xff\x4f\xff\x51" + b"garbage" * 10])
    ds["PixelData"].VR = "OB"
    ds.save_as(src / "j.dcm")
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, src, name="dcm")
    (p,) = info.value.problems
    assert p.startswith("j.dcm: cannot decode the pixel data (JPEG 2000") and "\n" not in p
