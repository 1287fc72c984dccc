"""The demo data made by pxp: generator output, chemistry checks, phantoms, `pxp demo`."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rdkit import Chem
from rdkit.Chem import Descriptors, rdMolDescriptors
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.analysis.validate import validate
from pxp.data.demo.make_demo import DATA_DIR, DRUGS, FEW_SHOT, demo_files, main
from pxp.data.demo.phantoms import FINDINGS, draw_phantom
from pxp.running.pxp.controlled.demo import DEMO_EXPERIMENTS, DEMO_STEPS, ensure_demo
from pxp.storage.store import count_rows
from pxp.storage.tables import Asset, Dataset, Experiment, Instance, Session

FILES = demo_files()


def test_committed_demo_files_are_the_generator_output() -> None:
    on_disk = {p.relative_to(DATA_DIR).as_posix() for d in ("demo-rad", "demo-drug")
               for p in (DATA_DIR / d).rglob("*") if p.is_file()}
    assert on_disk == set(FILES)
    for rel, data in FILES.items():
        committed = (DATA_DIR / rel).read_bytes()
        if rel.endswith(".png"):
            # pixels must be equal; PNG bytes may differ only with another zlib build
            a = np.asarray(Image.open(io.BytesIO(committed)), dtype=np.int16)
            b = np.asarray(Image.open(io.BytesIO(data)), dtype=np.int16)
            assert a.shape == b.shape and np.abs(a - b).max() <= 1, rel
        else:
            assert committed == data, f"{rel} differs: run python -m pxp.data.demo.make_demo"
    total = sum(len(d) for d in FILES.values())
    assert total < 1_500_000


def test_make_demo_writes_the_committed_files_into_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m pxp.data.demo.make_demo --out DIR` (RAD phantoms, DRUG rows, few-shot rows)."""
    main(["--out", str(tmp_path)])
    assert f"wrote {len(FILES)} files" in capsys.readouterr().out
    written = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert written == FILES
    for rel in ("demo-rad/cases.csv", "demo-drug/drugs.csv", "demo-drug/few_shot.csv"):
        assert written[rel] == (DATA_DIR / rel).read_bytes(), rel


def _heavy_atoms(smiles: str) -> Counter[str]:
    mol = Chem.MolFromSmiles(smiles)
    assert mol is not None, smiles
    return Counter(a.GetSymbol() for a in mol.GetAtoms() if a.GetAtomicNum() > 1)


def test_demo_drugs_meet_the_criteria() -> None:
    assert len(DRUGS) >= 30
    assert len({d[0] for d in DRUGS}) == len(DRUGS)
    assert len({Chem.CanonSmiles(d[1]) for d in DRUGS}) == len(DRUGS)
    for name, target, reactants, explanation in DRUGS:
        mol = Chem.MolFromSmiles(target)
        assert mol is not None, name
        assert 150 <= Descriptors.MolWt(mol) <= 300, name
        assert rdMolDescriptors.CalcNumAromaticRings(mol) >= 1, name
        parts = reactants.split(".")
        assert all(Chem.MolFromSmiles(p) is not None for p in parts), name
        product, available = _heavy_atoms(target), _heavy_atoms(reactants)
        missing = {el: n - available[el] for el, n in product.items() if available[el] < n}
        assert not missing, f"{name}: reactants lack {missing}"
        assert len(explanation) > 30, name
        assert any(w in explanation.lower() for w in ("disconnection", "interconversion",
                                                       "hydrolysis")), name
    for target, reactants, _ in FEW_SHOT:
        assert Chem.MolFromSmiles(target) is not None
        assert all(Chem.MolFromSmiles(p) is not None for p in reactants.split("."))
        assert not (set(_heavy_atoms(target)) - set(_heavy_atoms(reactants)))


def test_demo_csvs_are_in_the_study_formats() -> None:
    rad = list(csv.DictReader(io.StringIO(FILES["demo-rad/cases.csv"].decode())))
    assert len(rad) == 30
    assert Counter(r["label"] for r in rad) == {f: 6 for f in FINDINGS}
    assert {r["split"] for r in rad} == {"train", "val", "test"}
    for f in FINDINGS:
        assert {r["split"] for r in rad if r["label"] == f} == {"train", "val", "test"}
    drugs = list(csv.DictReader(io.StringIO(FILES["demo-drug/drugs.csv"].decode())))
    assert [d["name"] for d in drugs] == [d[0] for d in DRUGS]
    assert {"output", "input", "explanation"} <= set(drugs[0])


def _ctr(png: bytes) -> float:
    """Measure the cardiothoracic ratio on the image: widest run of heart-bright pixels."""
    a = np.asarray(Image.open(io.BytesIO(png)), dtype=np.float64)
    n = a.shape[0]
    band = a[int(0.6 * n):int(0.7 * n), :]
    heart = band > 205
    widths = []
    for row in heart:
        cols = np.flatnonzero(row[int(0.2 * n):int(0.85 * n)])
        widths.append((cols.max() - cols.min() + 1) / n if cols.size else 0.0)
    return max(widths) / (0.82 - 0.175)


@pytest.mark.parametrize("finding", FINDINGS)
def test_phantoms_are_deterministic_and_show_their_finding(finding: str) -> None:
    a, b = draw_phantom(finding, 7), draw_phantom(finding, 7)
    assert a.png == b.png and a.facts == b.facts
    assert draw_phantom(finding, 8).png != a.png
    im = Image.open(io.BytesIO(a.png))
    assert im.size == (256, 256) and im.mode == "L"
    ctr = _ctr(a.png)
    if finding == "Cardiomegaly":
        assert a.facts["ctr"] > 0.5 and ctr > 0.5
    else:
        assert a.facts["ctr"] < 0.5 and ctr < 0.52


def test_ensure_demo_loads_datasets_and_finished_experiments(any_engine: Engine) -> None:
    steps: list[tuple[int, str]] = []
    # each step is named as it starts, in order (the app's first start shows them)
    assert ensure_demo(any_engine, progress=lambda i, what: steps.append((i, what))) is True
    assert steps == list(enumerate(DEMO_STEPS)) and len(DEMO_STEPS) == 2 + len(DEMO_EXPERIMENTS)
    assert all(name in DEMO_STEPS[2 + i] for i, name in enumerate(DEMO_EXPERIMENTS.values()))
    with DB(any_engine) as db:
        rad = db.exec(select(Dataset).where(Dataset.name == "demo-rad")).one()
        drug = db.exec(select(Dataset).where(Dataset.name == "demo-drug")).one()
        assert (rad.task, rad.synthetic, drug.task) == ("rad", True, "drug")
        assert rad.config["labels"] == list(FINDINGS)
        assert len(drug.config["few_shot"]) == len(FEW_SHOT)
        insts = db.exec(select(Instance).where(Instance.dataset_id == rad.id)).all()
        assert len(insts) == 30 and all(i.meta["synthetic"] for i in insts)
        assert all(i.asset_sha256 for i in insts) and count_rows(db, Asset) == 30
        assert len(db.exec(select(Instance).where(Instance.dataset_id == drug.id)).all()) == len(
            DRUGS)
        for name in DEMO_EXPERIMENTS.values():
            exp = db.exec(select(Experiment).where(Experiment.name == name)).one()
            assert exp.status == "finished" and exp.config["machine"] == "simulated"
        sessions = db.exec(select(Session)).all()
        assert sessions and all(s.status == "finished" for s in sessions)
        before = (count_rows(db, Dataset), count_rows(db, Instance), count_rows(db, Session))
    checked, violations = validate(any_engine)
    assert checked == len(sessions) and violations == []
    assert ensure_demo(any_engine) is False
    with DB(any_engine) as db:
        assert (count_rows(db, Dataset), count_rows(db, Instance), count_rows(db, Session)) == before


def test_demo_data_dir_is_inside_the_package() -> None:
    assert Path(__file__).resolve().parents[2] / "pxp" / "data" / "demo_data" == DATA_DIR
