"""Generic CSV/JSONL import with a column mapping."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.generic import import_table, parse_mapping
from pxp.storage.tables import Asset, Dataset, Instance


def png(path: Path, value: int) -> None:
    buf = io.BytesIO()
    Image.new("L", (16, 16), value).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())


def instances(engine: Engine) -> list[Instance]:
    with DB(engine) as db:
        return list(db.exec(select(Instance).order_by(Instance.ordinal)))


def test_parse_mapping() -> None:
    assert parse_mapping(["smiles=input", " rxn = prediction "]) == {
        "smiles": "input", "rxn": "prediction"}
    with pytest.raises(ImportProblems) as info:
        parse_mapping(["nofield", "a=colour"])
    assert info.value.problems == ["--map 'nofield': expected COLUMN=FIELD",
                                   "--map 'a=colour': unknown field 'colour' (one of key, input, "
                                   "image, prediction, label, explanation, split)"]


def test_drug_csv_with_mapping_and_extra_columns(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "rxn.csv"
    f.write_text("id,product,precursors,why,yield\n"
                 "r1,CC(=O)Nc1ccc(O)cc1,CC(=O)OC(C)=O.Nc1ccc(O)cc1,acetylation,90\n"
                 "r2,CCOC(=O)c1ccc(N)cc1,Nc1ccc(C(=O)O)cc1.CCO,esterification,\n")
    mapping = parse_mapping(["id=key", "product=input", "precursors=prediction",
                             "why=explanation"])
    res = import_table(engine, f, task="drug", mapping=mapping, split="train")
    assert (res.dataset, res.added) == ("rxn", 2)
    r1, r2 = instances(engine)
    assert (r1.key, r1.payload, r1.split) == ("r1", "CC(=O)Nc1ccc(O)cc1", "train")
    assert r1.reference_prediction == "CC(=O)OC(C)=O.Nc1ccc(O)cc1"
    assert r1.reference_explanation == "acetylation" and r1.meta == {"yield": "90"}
    assert r2.meta == {}
    again = import_table(engine, f, task="drug", mapping=mapping, split="train")
    assert again.added == 0 and again.unchanged == 2


def test_rad_jsonl_with_images_and_default_names(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    png(tmp_path / "img" / "a.png", 10)
    png(tmp_path / "img" / "b.png", 20)
    f = tmp_path / "cases.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"image": "img/a.png", "label": "Pneumonia", "explanation": "consolidation",
         "split": "val", "age_band": 40},
        {"image": "img/b.png", "label": "Cardiomegaly", "explanation": "big heart",
         "split": "test"},
        {"image": "img/a.png", "label": "Pneumothorax", "explanation": "pleural line"},
    ]) + "\n")
    res = import_table(engine, f, task="rad")
    assert (res.added, res.images, res.assets_added) == (3, 2, 2)
    a, b, c = instances(engine)
    assert (a.label, a.reference_prediction, a.split) == ("Pneumonia", "Pneumonia", "val")
    assert a.meta == {"age_band": "40", "file": "img/a.png"}
    assert a.asset_sha256 == c.asset_sha256 != b.asset_sha256 and c.split is None
    with DB(engine) as db:
        ds = db.exec(select(Dataset)).one()
        assert ds.config["labels"] == ["Pneumonia", "Cardiomegaly", "Pneumothorax"]
        assert len(db.exec(select(Asset)).all()) == 2


def test_text_task_and_refusals_write_nothing(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "q.csv"
    f.write_text("question,answer\nWhat is 2+2?,4\n,5\n")
    with pytest.raises(ImportProblems) as info:
        import_table(engine, f, task="text", mapping={"question": "input", "answer": "prediction"})
    assert info.value.problems == ["q.csv:3: empty input"]
    with pytest.raises(ImportProblems, match="no column for input"):
        import_table(engine, f, task="text")
    with pytest.raises(ImportProblems, match="no column 'nope' to map"):
        import_table(engine, f, task="text", mapping={"nope": "input"})
    bad = tmp_path / "bad.csv"
    bad.write_text("input,prediction\nC1CC,CCO\nCCO,CC(\n")
    with pytest.raises(ImportProblems) as info:
        import_table(engine, bad, task="drug")
    assert info.value.problems == ["bad.csv:2: invalid target (input) SMILES 'C1CC'",
                                   "bad.csv:3: invalid reactant (prediction) SMILES 'CC('"]
    other = tmp_path / "x.xlsx"
    other.write_bytes(b"PK")
    with pytest.raises(ImportProblems, match=r"expected a \.csv or \.jsonl file"):
        import_table(engine, other, task="text")
    jl = tmp_path / "broken.jsonl"
    jl.write_text('{"input": "a"}\n[1, 2]\n{oops\n')
    with pytest.raises(ImportProblems) as info:
        import_table(engine, jl, task="text")
    assert info.value.problems == ["broken.jsonl:2: expected a JSON object {...}, got an array",
                                   "broken.jsonl:3: not valid JSON (Expecting property name "
                                   "enclosed in double quotes); write one JSON object per line"]
    assert instances(engine) == []
    ok = import_table(engine, _ok(tmp_path), task="text")
    assert ok.added == 1 and instances(engine)[0].payload == "What is 2+2?"


def _ok(tmp_path: Path) -> Path:
    f = tmp_path / "ok.csv"
    f.write_text("input,prediction,explanation\nWhat is 2+2?,4,arithmetic\n")
    return f


def test_mapping_as_strings_and_app_alias(engine: Engine, tmp_path: Path) -> None:
    from pxp.data.importers.generic import import_generic

    f = tmp_path / "t.csv"
    f.write_text("q,a\nWhy?,Because.\n")
    res = import_generic(engine, f, task="text", mapping=["q=input", "a=explanation"], name="t")
    assert res.added == 1 and instances(engine)[0].reference_explanation == "Because."
