"""Uploads on the Datasets page through pxp's importers: DICOM zip, generic CSV with a
column mapping, a custom task config attached to a dataset, and their one-line refusals."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app import imports
from pxp.storage.tables import Asset, Dataset, Instance
from tests.data.test_data_dicom import make_dicom

EXAMPLE_TASK = Path(__file__).resolve().parents[2] / "pxp" / "tasks" / "examples" / "adr_causality.toml"


class Up:
    """What st.file_uploader hands over: a name and the bytes."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def test_dicom_zip_is_deidentified_and_labelled(engine: Engine, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    make_dicom(src / "a.dcm")
    make_dicom(src / "b.dcm")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(src / "a.dcm", "study/a.dcm")
        zf.write(src / "b.dcm", "study/b.dcm")
        zf.writestr("study/labels.csv", "file,label\nstudy/a.dcm,Pneumonia\nstudy/b.dcm,Atelectasis\n")
    out = imports.run_import(engine, "dicom", Up("ward.zip", buf.getvalue()), name="ward",
                             options={"labels": "labels.csv"})
    assert out.ok, out.messages
    with DB(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == "ward")).one()
        rows = db.exec(select(Instance).where(Instance.dataset_id == ds.id)).all()
        assert sorted(r.label for r in rows) == ["Atelectasis", "Pneumonia"]
        for a in db.exec(select(Asset)).all():
            assert b"Doe^Jane" not in a.data and b"MRN-4711" not in a.data


def test_generic_csv_with_a_mapping_and_its_refusal(engine: Engine) -> None:
    csv = b"case,narrative,finding,why\nc1,Rash after amoxicillin,Probable,Onset on day 3.\n"
    bad = imports.run_import(engine, "generic", Up("adr.csv", csv), name="adr",
                             options={"task": "text", "mapping": ["nosuch=key"]})
    assert not bad.ok and len(bad.messages) == 1 and "no column 'nosuch'" in bad.messages[0]
    good = imports.run_import(engine, "generic", Up("adr.csv", csv), name="adr",
                              options={"task": "text", "mapping": ["case=key", "narrative=input",
                                                                   "finding=prediction", "why=explanation"]})
    assert good.ok, good.messages
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
        assert (inst.key, inst.payload, inst.reference_prediction) == ("c1", "Rash after amoxicillin", "Probable")


def test_an_upload_shows_the_first_20_problems_then_their_count(engine: Engine) -> None:
    csv = b"key,input\n" + b"".join(b"k%d,\n" % i for i in range(24))
    bad = imports.run_import(engine, "generic", Up("e.csv", csv), name="e", options={"task": "text"})
    assert not bad.ok
    assert bad.messages == [f"e.csv:{i + 2}: empty input" for i in range(20)] + [
        "... and 4 more problems not shown (fix these and import again)"]


def test_attach_a_custom_task_config(engine: Engine) -> None:
    csv = b"key,input,prediction,explanation\nc1,Rash after amoxicillin,Probable,Onset on day 3.\n"
    assert imports.run_import(engine, "generic", Up("adr.csv", csv), name="adr", options={"task": "text"}).ok
    bad = imports.run_import(engine, "task", Up("t.toml", b"name = 3\\n["), options={"dataset": "adr"})
    assert not bad.ok and len(bad.messages) == 1
    missing = imports.run_import(engine, "task", Up(EXAMPLE_TASK.name, EXAMPLE_TASK.read_bytes()),
                                 options={"dataset": "nope"})
    assert not missing.ok and "no dataset named 'nope'" in missing.messages[0]
    out = imports.run_import(engine, "task", Up(EXAMPLE_TASK.name, EXAMPLE_TASK.read_bytes()),
                             options={"dataset": "adr"})
    assert out.ok, out.messages
    from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
    from pxp.running.pxp.live.turns import load_session

    eid = create_live_experiment(engine, dataset="adr")
    sid = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name="pv"))
    assert sid is not None
    s = load_session(engine, sid)
    assert s.match_kind == "label" and s.labels == ["Certain", "Probable", "Possible", "Unlikely"]


def test_every_offered_importer_is_installed() -> None:
    assert all(k.available() for k in imports.KINDS), [k.key for k in imports.KINDS if not k.available()]


def test_a_table_upload_reports_its_progress(engine: Engine) -> None:
    rows = "".join(f"r{i},text {i}\n" for i in range(12_000))
    seen: list[tuple[int, float]] = []
    out = imports.run_import(engine, "generic", Up("big.csv", f"key,input\n{rows}".encode()),
                             progress=lambda n, fraction: seen.append((n, fraction)))
    assert out.ok, out.messages
    assert seen[-1] == (12_000, 1.0)  # the page's bar ends full
    assert [n for n, _ in seen] == sorted(n for n, _ in seen)


def test_a_database_fault_during_an_upload_names_the_database(engine: Engine, db_url: str) -> None:
    """A full disk under a Datasets-page import is one line naming the database and the fault, never the driver's
    text; nothing is stored."""
    from typing import Any

    from sqlalchemy import event

    pages = int(engine.connect().exec_driver_sql("PRAGMA page_count").scalar() or 0)

    @event.listens_for(engine, "checkout")
    def full(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA max_page_count = {pages + 1}")
        cur.close()

    rows = "".join(f"k{i},{'x' * 200},{'y' * 200}\n" for i in range(3000))
    out = imports.run_import(engine, "generic", Up("big.csv", ("input,prediction,explanation\n" + rows).encode()),
                             name="big", options={"task": "text", "mapping": ["input=key", "input=input"]})
    path = engine.url.database
    assert not out.ok and len(out.messages) == 1, out.messages
    assert out.messages[0].startswith(f"the database {path} failed: the disk is full"), out.messages
    assert "[SQL" not in out.messages[0] and "sqlite3" not in out.messages[0]
    event.remove(engine, "checkout", full)
    with DB(engine) as db:
        assert db.exec(select(Dataset).where(Dataset.name == "big")).first() is None
