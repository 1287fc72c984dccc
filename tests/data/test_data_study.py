"""Importing the published study formats, and refusing malformed input."""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.images import ImageRejected, prepare_image, read_image_file
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.study import import_study_drug, import_study_rad
from pxp.storage.store import count_rows
from pxp.storage.tables import Asset, Dataset, Instance
from tests.study_sample import PUBLISHED, Study

RAD_HEADER = "case,label,label_short,img_path,report,link\n"


def counts(engine: Engine) -> tuple[int, int, int]:
    with DB(engine) as db:
        return count_rows(db, Dataset), count_rows(db, Instance), count_rows(db, Asset)


def png_bytes(size: tuple[int, int] = (8, 8), value: int = 100) -> bytes:
    buf = io.BytesIO()
    Image.new("L", size, value).save(buf, format="PNG")
    return buf.getvalue()


def test_study_files_import_with_the_published_counts(any_engine: Engine, study: Study) -> None:
    rad = import_study_rad(any_engine, study.rad_csv, name="study-rad")
    assert (rad.added, rad.images, rad.assets_added) == (20, 19, 19)
    drug = import_study_drug(any_engine, study.drug_csv, few_shot=study.few_shot, name="study-drug")
    assert drug.added == 60
    assert counts(any_engine) == (2, 80, 19)
    rad_first, drug_first = study.rows(study.rad_csv)[0], study.rows(study.drug_csv)[0]
    with DB(any_engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == "study-rad")).one()
        assert ds.config["labels"] == ["Atelectasis", "Pneumonia", "Pleural Effusion",
                                       "Pneumothorax", "Cardiomegaly"]
        rows = db.exec(select(Instance).where(Instance.dataset_id == ds.id)).all()
        # case_20 serves two rows (two labels) with one stored image
        twenty = [r for r in rows if r.meta["case"] == "case_20"]
        assert {r.label for r in twenty} == {"Atelectasis", "Pneumothorax"}
        assert len({r.asset_sha256 for r in twenty}) == 1
        first = next(r for r in rows if r.key == "case_1")
        assert first.reference_prediction == rad_first["label"] == "Atelectasis"
        assert first.reference_explanation == rad_first["report"]
        assert first.meta["link"] == rad_first["link"]
        asset = db.get(Asset, first.asset_sha256)
        assert asset is not None and asset.mime == "image/png"
        assert (asset.width, asset.height) == (548, 630)
        assert asset.data == (study.root / rad_first["img_path"]).read_bytes()
        dds = db.exec(select(Dataset).where(Dataset.name == "study-drug")).one()
        assert len(dds.config["few_shot"]) == 5
        assert set(dds.config["few_shot"][0]) == {"target", "reactants", "explanation"}
        one = db.exec(select(Instance).where(Instance.dataset_id == dds.id)
                      .order_by(Instance.ordinal)).first()
        assert one is not None
        assert (one.payload, one.reference_prediction) == (drug_first["input"], drug_first["output"])
        assert one.reference_explanation == drug_first["explanation"]


@pytest.mark.published
def test_the_published_sample_reads_as_published(engine: Engine) -> None:
    """Facts of the published rows themselves: a Radiopaedia case and its report, a sulfonamide."""
    sample = Study(PUBLISHED)
    import_study_rad(engine, sample.rad_csv, name="study-rad")
    import_study_drug(engine, sample.drug_csv, name="study-drug")
    with DB(engine) as db:
        first = db.exec(select(Instance).where(Instance.key == "case_1")).one()
        assert first.reference_explanation.startswith("This patient, a 60-year-old female")
        assert first.meta["link"] == "https://radiopaedia.org/cases/45643"
        drug = db.exec(select(Instance).where(
            Instance.payload == "N#Cc1ccccc1Oc1ccc(N(Cc2cccnc2)S(=O)(=O)CC(F)(F)F)cc1")).one()
        assert drug.reference_prediction.endswith(".O=S(=O)(Cl)CC(F)(F)F")
        assert "sulfonamide" in drug.reference_explanation


def test_reimport_is_idempotent(engine: Engine, study: Study) -> None:
    import_study_rad(engine, study.rad_csv)
    import_study_drug(engine, study.drug_csv)
    before = counts(engine)
    again = import_study_rad(engine, study.rad_csv)
    assert (again.added, again.unchanged, again.assets_added) == (0, 20, 0)
    assert import_study_drug(engine, study.drug_csv).added == 0
    assert counts(engine) == before == (2, 80, 19)


def test_split_option_and_default_name(engine: Engine, generated_study: Study) -> None:
    res = import_study_drug(engine, generated_study.drug_csv, split="test")
    assert res.dataset == "retro"
    with DB(engine) as db:
        assert {i.split for i in db.exec(select(Instance))} == {"test"}
    with pytest.raises(ImportProblems, match="split must be train, val or test"):
        import_study_drug(engine, generated_study.drug_csv, split="holdout", name="other")


def test_images_root_explicit(engine: Engine, tmp_path: Path, generated_study: Study) -> None:
    csv = tmp_path / "cases.csv"
    (tmp_path / "imgs" / "data" / "xrays").mkdir(parents=True)
    shutil.copy(generated_study.xrays / "Case 11 Image.jpeg",
                tmp_path / "imgs" / "data" / "xrays" / "a b.jpeg")
    csv.write_text(RAD_HEADER + "c1,Atelectasis,ATCS,data/xrays/a b.jpeg,Some report.,\n")
    res = import_study_rad(engine, csv, images_root=tmp_path / "imgs")
    assert res.added == 1
    with DB(engine) as db:
        assert db.exec(select(Asset)).one().mime == "image/jpeg"


# --- malformed input: refused with its reason, nothing written ---------------------------


def refused(engine: Engine, fn: object, *args: object, **kw: object) -> list[str]:
    with pytest.raises(ImportProblems) as info:
        fn(engine, *args, **kw)  # type: ignore[operator]
    assert counts(engine) == (0, 0, 0), "a refused import wrote something"
    assert info.value.problems
    return info.value.problems


def test_missing_column(engine: Engine, tmp_path: Path) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("case,label,report,link\nc1,Pneumonia,text,\n")
    (p,) = refused(engine, import_study_rad, csv)
    assert "x.csv:1: missing column(s) img_path" in p
    csv.write_text("output,explanation\nCCO,ethanol\n")
    (p,) = refused(engine, import_study_drug, csv)
    assert "missing column(s) input" in p


def test_bad_encoding(engine: Engine, tmp_path: Path) -> None:
    csv = tmp_path / "latin.csv"
    csv.write_bytes("output,input,explanation\nCCO,CC=O,r\u00e9duction\n".encode("latin-1"))
    (p,) = refused(engine, import_study_drug, csv)
    assert p.startswith("latin.csv:2: not UTF-8 text")


def test_empty_file(engine: Engine, tmp_path: Path) -> None:
    csv = tmp_path / "empty.csv"
    csv.write_text("")
    assert refused(engine, import_study_drug, csv) == ["empty.csv: the file is empty"]
    csv.write_text("output,input,explanation\n")
    assert refused(engine, import_study_drug, csv) == ["empty.csv: the file has a header but no rows"]
    assert "no such file" in refused(engine, import_study_drug, tmp_path / "nope.csv")[0]


def test_invalid_smiles_rows_are_reported_and_nothing_imported(engine: Engine, tmp_path: Path) -> None:
    csv = tmp_path / "r.csv"
    csv.write_text(
        "output,input,explanation\n"
        "CC(=O)OC(C)=O.Nc1ccc(O)cc1,CC(=O)Nc1ccc(O)cc1,acetylation\n"
        "CC(=O)OC(C)=O.Nc1ccc(O)cc1,C1CC,ring not closed\n"
        '"CCO.c1ccccc1(",CCOc1ccccc1,"multi\nline"\n'
    )
    problems = refused(engine, import_study_drug, csv)
    assert problems == [
        "r.csv:3: invalid target (input) SMILES 'C1CC'",
        "r.csv:4: invalid reactant (output) SMILES 'c1ccccc1('",
    ]


def test_invalid_few_shot_is_refused(engine: Engine, tmp_path: Path, generated_study: Study) -> None:
    shots = tmp_path / "shots.csv"
    shots.write_text("output,input,explanation,matchOK\nXx,CCO,bad,FALSE\n")
    problems = refused(engine, import_study_drug, generated_study.drug_csv, few_shot=shots)
    assert problems == ["shots.csv:2: invalid reactant (output) SMILES 'Xx'"]


def test_missing_image(engine: Engine, tmp_path: Path) -> None:
    csv = tmp_path / "data" / "x.csv"
    csv.parent.mkdir()
    csv.write_text(RAD_HEADER + "c1,Pneumonia,PNUM,data/xrays/none.png,report,\n")
    (p,) = refused(engine, import_study_rad, csv)
    assert p == "x.csv:2: data/xrays/none.png: image not found"


def test_path_escaping_the_images_root(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "secret.png").write_bytes(png_bytes())
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.png").symlink_to(tmp_path / "secret.png")
    csv = root / "x.csv"
    csv.write_text(RAD_HEADER
                   + "c1,Pneumonia,PNUM,../secret.png,report,\n"
                   + "c2,Pneumonia,PNUM,/etc/passwd,report,\n"
                   + "c3,Pneumonia,PNUM,link.png,report,\n")
    problems = refused(engine, import_study_rad, csv, images_root=root)
    assert len(problems) == 3
    assert "x.csv:2: image path '../secret.png' escapes the images root" in problems[0]
    assert "x.csv:3: absolute image path '/etc/passwd' is not allowed" in problems[1]
    assert "x.csv:4: image path 'link.png' escapes the images root" in problems[2]


def test_not_an_image_and_truncated(engine: Engine, tmp_path: Path, generated_study: Study) -> None:
    (tmp_path / "a.png").write_bytes(b"GIF89a" + b"\x00" * 40)
    good = (generated_study.xrays / "Case 11 Image.jpeg").read_bytes()
    (tmp_path / "b.jpeg").write_bytes(good[: len(good) // 2])
    csv = tmp_path / "x.csv"
    csv.write_text(RAD_HEADER + "c1,Pneumonia,PNUM,a.png,report,\nc2,Pneumonia,PNUM,b.jpeg,r,\n")
    problems = refused(engine, import_study_rad, csv, images_root=tmp_path)
    assert problems[0] == "x.csv:2: a.png: not a PNG or JPEG image"
    assert problems[1].startswith("x.csv:3: b.jpeg: corrupt or truncated image")


def test_empty_fields(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(png_bytes())
    csv = tmp_path / "x.csv"
    csv.write_text(RAD_HEADER + "c1,Pneumonia,PNUM,a.png,r,\nc1,Pneumonia,PNUM,a.png,r,\n"
                   "c2,,PNUM,a.png,,\n")
    problems = refused(engine, import_study_rad, csv, images_root=tmp_path)
    assert problems == ["x.csv:4: empty label, report"]


def test_dataset_name_of_another_task_is_refused(engine: Engine, generated_study: Study) -> None:
    import_study_drug(engine, generated_study.drug_csv, name="mine")
    with pytest.raises(ImportProblems, match="already exists for task 'drug'"):
        import_study_rad(engine, generated_study.rad_csv, name="mine")
    assert counts(engine) == (1, 60, 0)


# --- images: bounded and safe ----------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def test_decompression_bomb_is_refused(tmp_path: Path) -> None:
    # a 100 kB-ish PNG claiming 40000 x 40000 pixels (1.6 gigapixels)
    w = h = 40000
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    raw = zlib.compress(b"\x00" * (w + 1) * 64, 9)
    bomb = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", raw) + _chunk(b"IEND", b"")
    assert len(bomb) < 200_000
    with pytest.raises(ImageRejected, match="decompression bomb"):
        prepare_image(bomb, where="bomb.png")
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb)
    with pytest.raises(ImageRejected, match=r"bomb\.png.*decompression bomb"):
        read_image_file(path)


def test_exif_orientation_is_applied_and_exif_dropped() -> None:
    im = Image.new("L", (40, 20), 0)
    im.paste(255, (0, 0, 10, 20))  # white band at the left
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    exif[0x010F] = "Camera Maker"
    buf = io.BytesIO()
    im.save(buf, format="JPEG", exif=exif.tobytes(), quality=95)
    prepared = prepare_image(buf.getvalue())
    assert (prepared.width, prepared.height) == (20, 40)
    assert prepared.mime == "image/png" and prepared.meta["exif_removed"]
    out = Image.open(io.BytesIO(prepared.data))
    assert not out.getexif()
    assert out.getpixel((10, 2)) > 200 and out.getpixel((10, 38)) < 50  # band now on top


def test_file_size_limit(tmp_path: Path) -> None:
    from pxp.data.images import MAX_IMAGE_BYTES

    path = tmp_path / "big.png"
    with path.open("wb") as f:
        f.write(png_bytes((64, 64)))
        f.truncate(MAX_IMAGE_BYTES + 1)  # sparse: nothing large is written
    with pytest.raises(ImageRejected, match="MB limit"):
        read_image_file(path)


@pytest.mark.parametrize("name", ["Case 1 Image - Lateral.png", "Case 11 Image.jpeg",
                                  "Case 2 Image - Lateral.jpeg"])
def test_every_truncation_is_a_clear_refusal(name: str, study: Study) -> None:
    data = (study.xrays / name).read_bytes()
    for cut in (0, 1, 8, 30, 100, 600, len(data) // 3, len(data) - 100):
        with pytest.raises(ImageRejected) as info:
            prepare_image(data[:cut], where=name)
        assert info.value.args[0].startswith(name) and "\n" not in info.value.args[0]


def test_a_study_label_outside_the_five_findings_is_refused(engine: Engine, tmp_path: Path) -> None:
    """The study X-ray CSV's labels are the study's five findings (docs/operations.md, Importing data): another
    is refused with its line and the set named; another spelling of one is stored as the set's own."""
    Image.new("L", (64, 64)).save(tmp_path / "a.png")
    csv_path = tmp_path / "x.csv"
    csv_path.write_text(RAD_HEADER + "c1,pleural  EFFUSION,,a.png,blunted angle,\nc2,Banana,,a.png,fruit,\n")
    with pytest.raises(ImportProblems) as info:
        import_study_rad(engine, csv_path, images_root=tmp_path)
    assert info.value.problems == ["x.csv:3: label 'Banana' is not one of the task's labels (Atelectasis, "
                                   "Pneumonia, Pleural Effusion, Cardiomegaly, Pneumothorax)"]
    csv_path.write_text(RAD_HEADER + "c1,pleural  EFFUSION,,a.png,blunted angle,\n")
    import_study_rad(engine, csv_path, images_root=tmp_path)
    with DB(engine) as db:
        assert [i.label for i in db.exec(select(Instance)).all()] == ["Pleural Effusion"]
