"""Real DICOM files from pydicom's own test corpus: every compressed
transfer syntax radiology archives use, and malformed files named with their element."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pydicom
import pytest
from pydicom.data import get_testdata_file
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.dicom import import_dicom
from pxp.storage.tables import Asset, Instance
from tests.cli.test_data_cli import run

CODECS = {
    "JPEG Baseline (Process 1)": "SC_jpeg_no_color_transform.dcm",
    "JPEG Extended (Process 2 and 4)": "JPGExtended.dcm",  # 12-bit
    "JPEG Lossless, Non-Hierarchical, First-Order Prediction (Process 14 [Selection Value 1])":
        "SC_rgb_jpeg_gdcm.dcm",
    "JPEG-LS Lossless Image Compression": "MR_small_jpeg_ls_lossless.dcm",
    "JPEG-LS Lossy (Near-Lossless) Image Compression": "JPEGLSNearLossless_16.dcm",
    "JPEG 2000 Image Compression": "JPEG2000.dcm",
    "JPEG 2000 Image Compression (Lossless Only)": "MR_small_jp2klossless.dcm",
    "RLE Lossless": "MR_small_RLE.dcm",
}


def shipped(name: str) -> Path:
    """A test file shipped inside the installed pydicom (never downloaded)."""
    path = get_testdata_file(name, download=False)
    assert path is not None, f"{name} is not shipped with pydicom"
    return Path(str(path))


@pytest.mark.parametrize("syntax", sorted(CODECS))
def test_every_compressed_transfer_syntax_imports(engine: Engine, tmp_path: Path,
                                                  syntax: str) -> None:
    src = shipped(CODECS[syntax])
    ds = pydicom.dcmread(src)
    assert ds.file_meta.TransferSyntaxUID.name == syntax
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(src, folder / src.name)
    res = import_dicom(engine, folder, name="codec")
    assert res.added == 1
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
        asset = db.get(Asset, inst.asset_sha256)
        assert asset is not None and (asset.width, asset.height) == (ds.Columns, ds.Rows)


def bad_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ward"
    folder.mkdir()
    shutil.copy(shipped("badVR.dcm"), folder / "badVR.dcm")
    shutil.copy(shipped("MR_small_RLE.dcm"), folder / "good.dcm")
    return folder


def test_bad_element_names_the_file_and_the_element(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, bad_folder(tmp_path))
    assert info.value.problems == [
        "badVR.dcm: element NumberOfFrames (0028,0008): '1A' is not a valid IS value"]
    with DB(engine) as db:
        assert db.exec(select(Instance)).first() is None


def test_skip_bad_imports_the_rest_and_logs_pydicom_warnings(
        engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pxp.dicom"):
        res = import_dicom(engine, bad_folder(tmp_path), skip_bad=True)
    assert res.added == 1
    assert res.warnings == [
        "badVR.dcm: element NumberOfFrames (0028,0008): '1A' is not a valid IS value (skipped)",
        "1 pydicom warning(s) about 1 file(s) went to the 'pxp.dicom' log (--log FILE keeps them)"]
    assert any("badVR.dcm: Invalid value for VR IS: '1A'" in r.getMessage()
               for r in caplog.records if r.name == "pxp.dicom")


def test_cli_skip_bad_and_log_file(db_url: str, tmp_path: Path) -> None:
    folder = bad_folder(tmp_path)
    code, _, err = run(db_url, "import", "dicom", str(folder))
    assert code == 1
    assert "badVR.dcm: element NumberOfFrames" in err and "UserWarning" not in err
    log = tmp_path / "dicom.log"
    code, out, err = run(db_url, "import", "dicom", str(folder), "--skip-bad", "--log", str(log))
    assert code == 0 and "1 instances (1 added)" in out
    assert "UserWarning" not in err and "Invalid value for VR" not in err
    assert "badVR.dcm: Invalid value for VR IS: '1A'" in log.read_text()


def test_the_real_cli_prints_no_raw_pydicom_warning(db_url: str, tmp_path: Path) -> None:
    """In a real process (no test logging handlers), pydicom's warnings about badVR.dcm reach
    neither stdout nor stderr: one summary line says where they went."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "pxp.cli.main", "--db", db_url, "import", "dicom",
                          str(bad_folder(tmp_path)), "--skip-bad"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "went to the 'pxp.dicom' log" in res.stdout + res.stderr
    assert "Invalid value for VR" not in res.stdout + res.stderr


def test_jpeg_lossy_with_a_broken_scan_header_is_repaired_and_imported(engine: Engine, tmp_path: Path) -> None:
    """JPEG-lossy.dcm (12-bit JPEG Extended, the issue's example) has Se = 0 in the start-of-scan
    header of a sequential image; libjpeg refuses it as written. The header is repaired (T.81 B.2.3),
    the image decodes, and the import says so in one line."""
    import numpy as np

    from pxp.data.images import open_image

    src = shipped("JPEG-lossy.dcm")
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(src, folder / src.name)
    res = import_dicom(engine, folder, name="lossy")
    assert res.added == 1
    assert any("JPEG-lossy.dcm: its JPEG scan header broke ITU-T T.81" in w for w in res.warnings)
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
        asset = db.get(Asset, inst.asset_sha256)
        assert asset is not None and (asset.width, asset.height) == (256, 1024)
        pixels = np.asarray(open_image(asset.data).convert("L"), dtype=np.float64)
    assert pixels.std() > 10  # a real image (a bone scan), not a blank frame
