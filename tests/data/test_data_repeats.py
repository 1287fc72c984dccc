"""Repeated keys in the published study files are kept, row by row."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.generic import import_table
from pxp.data.importers.study import import_study_drug, import_study_rad
from pxp.storage.store import count_rows
from pxp.storage.tables import Asset, Dataset, Instance
from tests.study_sample import Study

RAD_COLUMNS = ["case", "label", "label_short", "img_path", "report", "link"]


def png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (8, 8), value).save(buf, format="PNG")
    return buf.getvalue()


def val_file(tmp_path: Path, study: Study) -> Path:
    """A 27-row validation file like the published one, its rows after the study's X-ray file: case_10 on
    lines 23 and 27, same image and label, two reports; 26 distinct images."""
    sample = study.rows(study.rad_csv)
    (tmp_path / "xrays").mkdir()
    rows = []
    for i in range(1, 27):
        (tmp_path / "xrays" / f"val {i}.png").write_bytes(png(i * 7))
        src = sample[i % len(sample)]
        case = f"case_{i + 100}" if i != 22 else "case_10"
        rows.append({**src, "case": case, "img_path": f"xrays/val {i}.png",
                     "report": f"report {i}: {' '.join(src['report'].split())}"})
    rows.insert(25, {**rows[21], "report": "a second, different report for case_10"})
    path = tmp_path / "val_xray_data.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, RAD_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


def counts(engine: Engine) -> tuple[int, int, int]:
    with DB(engine) as db:
        return count_rows(db, Dataset), count_rows(db, Instance), count_rows(db, Asset)


def test_validation_file_with_a_repeated_case_imports_every_row(engine: Engine, tmp_path: Path,
                                                                 study: Study) -> None:
    path = val_file(tmp_path, study)
    res = import_study_rad(engine, path, images_root=tmp_path)
    assert (res.added, res.images, res.assets_added) == (27, 26, 26)
    assert res.warnings == ["val_xray_data.csv: case repeated, each row kept as its own "
                            "instance (key#2, ...): case_10 (lines 23, 27)"]
    assert counts(engine) == (1, 27, 26)
    with DB(engine) as db:
        ten = {i.key: i for i in db.exec(select(Instance)) if i.meta["case"] == "case_10"}
    assert set(ten) == {"case_10", "case_10#2"}
    assert (ten["case_10"].meta["row"], ten["case_10#2"].meta["row"]) == (23, 27)
    assert ten["case_10#2"].reference_explanation == "a second, different report for case_10"
    assert ten["case_10"].asset_sha256 == ten["case_10#2"].asset_sha256
    again = import_study_rad(engine, path, images_root=tmp_path)
    assert (again.added, again.unchanged, again.assets_added) == (0, 27, 0)
    assert counts(engine) == (1, 27, 26)


def test_identical_rows_are_imported_once_with_a_warning(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(png(1))
    path = tmp_path / "x.csv"
    path.write_text(",".join(RAD_COLUMNS) + "\nc1,Pneumonia,PNUM,a.png,r,\n"
                    "c1,Pneumonia,PNUM,a.png,r,\n")
    res = import_study_rad(engine, path, images_root=tmp_path)
    assert res.added == 1
    assert res.warnings == ["x.csv:3: identical to line 2; imported once"]


def test_escaping_path_still_refused_with_repeats(engine: Engine, tmp_path: Path, generated_study: Study) -> None:
    path = val_file(tmp_path, generated_study)
    text = path.read_text().replace("xrays/val 3.png", "../../etc/passwd")
    path.write_text(text)
    with pytest.raises(ImportProblems) as info:
        import_study_rad(engine, path, images_root=path.parent)
    assert info.value.problems == [f"val_xray_data.csv:4: image path '../../etc/passwd' "
                                   f"escapes the images root {path.parent}"]
    assert counts(engine) == (0, 0, 0)


def test_drug_rows_with_the_same_reaction_are_kept(engine: Engine, tmp_path: Path, study: Study) -> None:
    with study.drug_csv.open(newline="") as fh:
        rows = list(csv.reader(fh))
    rows.append([rows[1][0], rows[1][1], "another explanation of the same reaction"])
    rows.append(rows[2])
    path = tmp_path / "retro.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    res = import_study_drug(engine, path)
    assert res.added == len(rows) - 2  # one per row, less the identical copy
    assert any("identical to line" in w for w in res.warnings)
    assert any("reaction repeated" in w for w in res.warnings)
    with DB(engine) as db:
        keys = [i.key for i in db.exec(select(Instance))]
    assert sum(k.endswith("#2") for k in keys) == 1
    assert import_study_drug(engine, path).added == 0


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_generic_repeated_keys_are_kept(any_engine: Engine, tmp_path: Path, suffix: str) -> None:
    engine = any_engine
    path = tmp_path / f"t.{suffix}"
    if suffix == "csv":
        path.write_text("key,input,label\nk1,hello,a\nk1,world,b\nk2,x,c\nk2,x,c\n")
    else:
        path.write_text('{"key":"k1","input":"hello","label":"a"}\n'
                        '{"key":"k1","input":"world","label":"b"}\n'
                        '{"key":"k2","input":"x","label":"c"}\n'
                        '{"key":"k2","input":"x","label":"c"}\n')
    res = import_table(engine, path, task="text")
    assert res.added == 3
    n = 1 if suffix == "csv" else 0  # the CSV header is line 1
    assert res.warnings == [f"t.{suffix}:{4 + n}: identical to line {3 + n}; imported once",
                            f"t.{suffix}: key repeated, each row kept as its own instance "
                            f"(key#2, ...): k1 (lines {1 + n}, {2 + n})"]
    with DB(engine) as db:
        assert sorted(i.key for i in db.exec(select(Instance))) == ["k1", "k1#2", "k2"]


def test_a_key_repeated_after_the_first_batch_is_numbered_on_both_databases(any_engine: Engine,
                                                                            tmp_path: Path) -> None:
    """On PostgreSQL a new dataset's rows go straight into `instance`; a key repeated in a later
    batch rolls that back and the import is done again through the staging table: the same
    instances, numbers and ordinals as on SQLite, and one count of rows in the progress."""
    from pxp.data.importers.sending import BATCH

    n = BATCH + 500
    path = tmp_path / "late.csv"
    path.write_text("key,input\n" + "".join(f"k{i},row {i}\n" for i in range(n - 1)) + "k7,again\n")
    seen: list[int] = []
    res = import_table(any_engine, path, task="text", progress=lambda rows, _: seen.append(rows))
    assert (res.added, res.warnings) == (n, [f"late.csv: key repeated, each row kept as its own instance "
                                             f"(key#2, ...): k7 (lines 9, {n + 1})"])
    assert max(seen) == n
    with DB(any_engine) as db:
        rows = db.exec(select(Instance.key, Instance.ordinal, Instance.payload).order_by(Instance.ordinal)).all()
    assert [r[1] for r in rows] == list(range(1, n + 1))
    assert rows[-1] == ("k7#2", n, "again") and rows[7] == ("k7", 8, "row 7")
    assert import_table(any_engine, path, task="text").unchanged == n


def test_datasets_page_upload_shows_the_same_warning(engine: Engine, tmp_path: Path, study: Study) -> None:
    from pxp.app import imports
    from tests.app.test_app_imports import Up

    path = val_file(tmp_path, study)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for img in sorted((tmp_path / "xrays").iterdir()):
            zf.write(img, f"xrays/{img.name}")
    out = imports.run_import(engine, "study_rad", Up(path.name, path.read_bytes()),
                             [Up("xrays.zip", buf.getvalue())], name="val")
    assert out.ok, out.messages
    assert out.messages[1:] == ["val_xray_data.csv: case repeated, each row kept as its own "
                                "instance (key#2, ...): case_10 (lines 23, 27)"]
    assert counts(engine) == (1, 27, 26)
