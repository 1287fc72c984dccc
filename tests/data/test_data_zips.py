"""`pxp import dicom` takes a zip as the Datasets page does, refusing unsafe zips."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app import imports
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.dicom import import_dicom
from pxp.data.importers.zips import extract_zip
from pxp.storage.tables import Dataset
from tests.app.test_app_imports import Up
from tests.cli.test_data_cli import run
from tests.data.test_data_dicom import make_dicom


def ward_zip(tmp_path: Path, extra: str | None = None, symlink: bool = False) -> Path:
    make_dicom(tmp_path / "a.dcm")
    zpath = tmp_path / "ward.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.write(tmp_path / "a.dcm", "scans/a.dcm")
        if extra:
            zf.writestr(extra, b"not much")
        if symlink:
            info = zipfile.ZipInfo("scans/link.dcm")
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return zpath


def nothing_stored(engine: Engine) -> bool:
    with DB(engine) as db:
        return db.exec(select(Dataset)).first() is None


def test_cli_imports_a_dicom_zip(db_url: str, tmp_path: Path) -> None:
    code, out, err = run(db_url, "import", "dicom", str(ward_zip(tmp_path)), "--label", "Normal")
    assert code == 0, err
    assert "dataset 'ward': 1 instances (1 added)" in out


@pytest.mark.parametrize(("extra", "symlink", "reason"), [
    ("../evil.dcm", False, "entry '../evil.dcm' escapes the zip"),
    ("/abs/evil.dcm", False, "entry '/abs/evil.dcm' escapes the zip"),
    (None, True, "entry 'scans/link.dcm' is a symlink"),
])
def test_unsafe_zips_are_refused_by_cli_and_page(engine: Engine, tmp_path: Path,
                                                 extra: str | None, symlink: bool,
                                                 reason: str) -> None:
    zpath = ward_zip(tmp_path, extra, symlink)
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, zpath)
    assert info.value.problems == [f"ward.zip: {reason}"]
    out = imports.run_import(engine, "dicom", Up("ward.zip", zpath.read_bytes()), name="ward")
    assert not out.ok and out.messages == [f"ward.zip: {reason}"]
    assert nothing_stored(engine)
    assert not (tmp_path.parent / "evil.dcm").exists()


def test_zip_bomb_is_refused_on_the_bytes_unpacked(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.bin", b"\0" * (3 * 1024 * 1024))
    assert bomb.stat().st_size < 20_000
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ImportProblems) as info:
        extract_zip(bomb, out, max_bytes=2 * 1024 * 1024)
    assert info.value.problems == ["bomb.zip: more than 2 MB once unpacked (possible zip bomb)"]
    assert list(out.rglob("*.bin")) == []
    assert extract_zip(bomb, out, max_bytes=4 * 1024 * 1024) == 1
