"""Malformed files are refused, never half-read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.dicom import import_dicom
from pxp.data.importers.generic import import_table
from pxp.data.importers.limits import MAX_FIELD_CHARS
from pxp.data.importers.study import import_study_drug, import_study_rad
from pxp.storage.store import count_rows
from pxp.storage.tables import Dataset, Instance
from tests.cli.test_data_cli import run


def empty(engine: Engine) -> bool:
    with DB(engine) as db:
        return count_rows(db, Dataset) == count_rows(db, Instance) == 0


UNCLOSED = {
    "generic": "input,label\n\"hello there,a\nsecond row,b\n",
    "rad": "case,label,label_short,img_path,report,link\n"
           "c1,Pneumonia,PNUM,a.png,\"report\nc2,Pneumonia,PNUM,a.png,r,\n",
    "drug": "output,input,explanation\nCCO,CCO,\"why\nCCN,CCN,because\n",
    "few_shot": "output,input,explanation\nCCO,CCO,\"why\nCCN,CCN,because\n",
    "labels": "file,label\n\"a.dcm,Pneumonia\nb.dcm,Pneumonia\n",
}


@pytest.mark.parametrize("kind", sorted(UNCLOSED))
def test_unclosed_quote_is_refused_at_its_line(engine: Engine, tmp_path: Path,
                                               kind: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(UNCLOSED[kind])
    with pytest.raises(ImportProblems) as info:
        if kind == "generic":
            import_table(engine, bad, task="text")
        elif kind == "rad":
            import_study_rad(engine, bad, images_root=tmp_path)
        elif kind == "drug":
            import_study_drug(engine, bad)
        elif kind == "few_shot":
            good = tmp_path / "good.csv"
            good.write_text("output,input,explanation\nCCO,CCN,x\n")
            import_study_drug(engine, good, few_shot=bad)
        else:
            (tmp_path / "dicom").mkdir()
            import_dicom(engine, tmp_path / "dicom", labels=bad)
    assert info.value.problems == ["bad.csv:2: unclosed quote"]
    assert empty(engine)


def test_cli_unclosed_quote_exits_1_and_writes_nothing(db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(UNCLOSED["generic"])
    code, _, err = run(db_url, "import", "csv", str(bad))
    assert code == 1
    assert err.strip() == "error: bad.csv:2: unclosed quote"


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_one_field_limit_for_every_format(engine: Engine, tmp_path: Path, suffix: str) -> None:
    big = "x" * (MAX_FIELD_CHARS + 1)
    path = tmp_path / f"big.{suffix}"
    if suffix == "csv":
        path.write_text(f"input,label\nsmall,a\n{big},b\n")
    else:
        path.write_text(json.dumps({"input": "small", "label": "a"}) + "\n"
                        + json.dumps({"input": big, "label": "b"}) + "\n")
    line = 3 if suffix == "csv" else 2
    with pytest.raises(ImportProblems) as info:
        import_table(engine, path, task="text")
    assert info.value.problems == [f"big.{suffix}:{line}: a field is longer than the {MAX_FIELD_CHARS:,}-character "
                                   "limit for a text field; shorten it"]
    assert empty(engine)


def test_unknown_task_is_refused_naming_the_known_ones(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("input,label\nhello,a\n")
    code, _, err = run(db_url, "import", "csv", str(path), "--task", "nosuchtask")
    assert code == 1
    assert err.strip() == ("error: unknown task 'nosuchtask'; known tasks: rad, drug, text "
                           "(a custom task is attached to a dataset with its config)")
    code, _, _ = run(db_url, "import", "csv", str(path), "--task", "text")
    assert code == 0
