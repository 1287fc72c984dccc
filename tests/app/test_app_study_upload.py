"""Study RAD uploads on the Datasets page: images sent as separate files or as a
zip of the images folder are matched to the CSV's img_path by file name, a split can be
chosen like the CLI's --split, and a failed attempt clears the uploaders."""

from __future__ import annotations

import io
import zipfile

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app import imports
from pxp.storage.tables import Dataset, Instance
from tests.app import test_app
from tests.app.test_app import new_app, ok
from tests.app.test_app_imports import Up
from tests.study_sample import Study

app_db = test_app.app_db  # the app's fixture: a fresh SQLite database, no API keys


def _instances(engine: Engine, name: str) -> list[Instance]:
    with DB(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == name)).one()
        return list(db.exec(select(Instance).where(Instance.dataset_id == ds.id)).all())


def test_separate_image_files_match_the_csv_by_file_name(engine: Engine, study: Study) -> None:
    csv_path = study.rad_csv
    files = [Up(p.name, p.read_bytes()) for p in sorted(study.xrays.iterdir())]
    out = imports.run_import(engine, "study_rad", Up(csv_path.name, csv_path.read_bytes()), files, name="flat",
                             options={"split": "val"})
    assert out.ok, out.messages
    rows = _instances(engine, "flat")
    assert len(rows) == 20 and all(i.asset_sha256 for i in rows) and {i.split for i in rows} == {"val"}


def test_a_zip_of_the_images_folder_with_another_prefix_matches(engine: Engine, study: Study) -> None:
    csv_path = study.rad_csv
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(study.xrays.iterdir()):
            zf.write(p, f"my-upload/xrays/{p.name}")  # the CSV says data/xrays/...
    out = imports.run_import(engine, "study_rad", Up(csv_path.name, csv_path.read_bytes()),
                             [Up("xrays.zip", buf.getvalue())], name="zipped")
    assert out.ok, out.messages
    assert len(_instances(engine, "zipped")) == 20


def test_a_missing_image_is_one_line_naming_the_csv_line(engine: Engine, study: Study) -> None:
    csv_path = study.rad_csv
    files = [Up(p.name, p.read_bytes()) for p in sorted(study.xrays.iterdir())][1:]
    out = imports.run_import(engine, "study_rad", Up(csv_path.name, csv_path.read_bytes()), files, name="short")
    assert not out.ok and out.messages and all(m.startswith("train_xray_data.csv:") for m in out.messages)
    with DB(engine) as db:
        assert db.exec(select(Dataset).where(Dataset.name == "short")).first() is None


def test_the_page_shows_the_layout_offers_a_split_and_clears_a_failed_upload(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    from tests.factories import make_drug

    make_drug(engine)
    at = new_app("datasets")
    ok(at.selectbox(key="datasets_kind").set_value("study_rad").run())
    assert any("img_path" in c.value and "file name" in c.value for c in at.caption)
    assert at.selectbox(key="datasets_rad_split").options == ["None", "train", "val", "test"]
    at.get("file_uploader")[0].upload("bad.csv", b"case,label\n1,2\n", "text/csv")
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    ok(at)
    assert any("Nothing was imported" in e.value for e in at.error)
    assert all(u.value in (None, []) for u in at.get("file_uploader"))
