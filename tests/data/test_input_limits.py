"""Size limits on user and file input, at the limit and one over (docs/operations.md "Importing data" (limits)):
SMILES characters, atoms and fragments (pxp.data.chem), image pixels and frames (pxp.data.images,
pxp.data.importers.dicom), through the parser, the CSV/JSONL/study/transcript importers and the CLI. Each
refusal is one line naming the limit; nothing is stored.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.data.chem import (
    SMILES_MAX_ATOMS,
    SMILES_MAX_CHARS,
    SMILES_MAX_FRAGMENTS,
    SmilesTooLarge,
    canonical_smiles,
    smiles_set,
)
from pxp.data.images import MAX_FRAMES, MAX_PIXELS, ImageRejected, open_image
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.generic import import_table
from pxp.data.importers.study import import_study_drug
from pxp.data.importers.transcripts import import_transcripts
from pxp.data.sandbox import ChemFailed, run_sandboxed
from pxp.storage.tables import Instance, Message

TARGET = "CC(=O)Nc1ccc(O)cc1"


def at_char_limit() -> str:
    """A valid SMILES of exactly SMILES_MAX_CHARS characters (bracket atoms: few atoms)."""
    n = (SMILES_MAX_CHARS - 7 - 6) // 7
    s = "[13CH3]" + "[13CH2]" * n + "[CH2]O"
    assert len(s) == SMILES_MAX_CHARS
    return s


# (at the limit, one over, the limit's words in the line)
CASES = {
    "characters": (at_char_limit(), at_char_limit() + "C", f"limit of {SMILES_MAX_CHARS:,} characters"),
    "atoms": ("C" * SMILES_MAX_ATOMS, "C" * (SMILES_MAX_ATOMS + 1), f"limit of {SMILES_MAX_ATOMS} atoms"),
    "fragments": (".".join(["C"] * SMILES_MAX_FRAGMENTS), ".".join(["C"] * (SMILES_MAX_FRAGMENTS + 1)),
                  f"limit of {SMILES_MAX_FRAGMENTS} for one-step reactants"),
}


@pytest.mark.parametrize("limit", sorted(CASES))
def test_smiles_limits_at_and_one_over(limit: str) -> None:
    at, over, words = CASES[limit]
    assert smiles_set(at)
    with pytest.raises(SmilesTooLarge, match=words) as info:
        smiles_set(over)
    assert "\n" not in str(info.value) and len(str(info.value)) < 200
    if limit != "fragments":
        canonical_smiles(at)
        with pytest.raises(SmilesTooLarge, match=words):
            canonical_smiles(over)


def test_huge_smiles_are_refused_at_once() -> None:
    """What froze the server (3,000 atoms) or crashed it (20,000) is refused before RDKit."""
    for n in (3000, 20000):
        with pytest.raises(SmilesTooLarge, match=f"{n:,} characters"):
            smiles_set("C" * n)


@pytest.mark.parametrize("limit", sorted(CASES))
def test_csv_and_jsonl_importers(engine: Engine, tmp_path: Path, limit: str) -> None:
    at, over, words = CASES[limit]
    for fmt in ("csv", "jsonl"):
        for which, value in (("ok", at), ("over", over)):
            f = tmp_path / f"{limit}-{which}-{fmt}.{fmt}"
            rows = [{"input": TARGET, "prediction": value, "explanation": "x"}]
            if fmt == "csv":
                f.write_text("input,prediction,explanation\n" + f"{TARGET},{value},x\n")
            else:
                f.write_text("".join(json.dumps(r) + "\n" for r in rows))
            if which == "ok":
                assert import_table(engine, f, task="drug").added == 1
                continue
            with pytest.raises(ImportProblems) as info:
                import_table(engine, f, task="drug")
            assert len(info.value.problems) == 1 and words in info.value.problems[0]
            assert info.value.problems[0].startswith(f"{f.name}:2" if fmt == "csv" else f"{f.name}:1")


def test_study_importer(engine: Engine, tmp_path: Path) -> None:
    at, over, words = CASES["atoms"]
    f = tmp_path / "retro.csv"
    f.write_text(f"output,input,explanation\n{over},{TARGET},x\n{TARGET},{over},y\n")
    with pytest.raises(ImportProblems) as info:
        import_study_drug(engine, f)
    assert [p.split(": ")[0] for p in info.value.problems] == ["retro.csv:2", "retro.csv:3"]
    assert all(words in p for p in info.value.problems)
    f.write_text(f"output,input,explanation\n{at},{TARGET},x\n")
    assert import_study_drug(engine, f).added == 1


def _transcript(path: Path, prediction: str) -> Path:
    lines = [{"session": "s1", "instance": "t1", "j": 1, "sender": "machine", "tag": "INIT",
              "prediction": prediction, "explanation": "e"},
             {"session": "s1", "instance": "t1", "j": 2, "sender": "human", "tag": "RATIFY",
              "prediction": prediction, "explanation": "e", "match": True, "agree": True, "changed": False},
             {"session": "s1", "instance": "t1", "j": 3, "sender": "machine", "tag": "RATIFY",
              "prediction": prediction, "explanation": "e", "match": True, "agree": True, "changed": False}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@pytest.mark.parametrize("limit", sorted(CASES))
def test_transcript_importer(engine: Engine, tmp_path: Path, limit: str) -> None:
    at, over, words = CASES[limit]
    with pytest.raises(ImportProblems) as info:
        import_transcripts(engine, _transcript(tmp_path / "over.jsonl", over), name="over", n=10, k=3,
                           task="drug")
    assert len(info.value.problems) == 3 and all(words in p for p in info.value.problems)
    with DB(engine) as db:
        assert db.exec(select(Message)).first() is None
    res = import_transcripts(engine, _transcript(tmp_path / "ok.jsonl", at), name="ok", n=10, k=3, task="drug")
    assert res.messages == 3


@pytest.mark.parametrize("limit", sorted(CASES))
def test_cli_importers(db_url: str, tmp_path: Path, limit: str) -> None:
    at, over, words = CASES[limit]
    runner = CliRunner()
    f = tmp_path / "t.csv"
    f.write_text(f"input,prediction,explanation\n{TARGET},{over},x\n")
    res = runner.invoke(app, ["--db", db_url, "import", "csv", str(f), "--task", "drug"])
    assert res.exit_code == 1 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and words in res.stderr and res.stderr.startswith("error: t.csv:2")
    res = runner.invoke(app, ["--db", db_url, "import", "transcripts", str(_transcript(tmp_path / "o.jsonl", over)),
                              "--name", "o", "--task", "drug"])
    assert res.exit_code == 1 and len(res.stderr.splitlines()) == 3 and words in res.stderr
    f.write_text(f"input,prediction,explanation\n{TARGET},{at},x\n")
    res = runner.invoke(app, ["--db", db_url, "import", "csv", str(f), "--task", "drug"])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(app, ["--db", db_url, "import", "transcripts", str(_transcript(tmp_path / "a.jsonl", at)),
                              "--name", "a", "--task", "drug"])
    assert res.exit_code == 0, res.stderr


def _png(size: tuple[int, int], frames: int = 1, mode: str = "L") -> bytes:
    buf = io.BytesIO()
    ims = [Image.new(mode, size, i * 40) for i in range(frames)]
    ims[0].save(buf, format="PNG", save_all=frames > 1, append_images=ims[1:])
    return buf.getvalue()


def test_image_frames_at_and_one_over() -> None:
    assert open_image(_png((8, 8), MAX_FRAMES)).size == (8, 8)
    with pytest.raises(ImageRejected, match=f"{MAX_FRAMES + 1} frames is more than the {MAX_FRAMES} frame limit"):
        open_image(_png((8, 8), MAX_FRAMES + 1), where="x.png")


def test_image_frames_through_the_csv_importer_and_the_cli(db_url: str, tmp_path: Path) -> None:
    """An image column naming a file over the frame limit: one line naming it, exit 1; at the limit, imported."""
    (tmp_path / "ok.png").write_bytes(_png((8, 8), MAX_FRAMES))
    (tmp_path / "over.png").write_bytes(_png((8, 8), MAX_FRAMES + 1))
    runner = CliRunner()
    for name, code in (("over", 1), ("ok", 0)):
        f = tmp_path / f"{name}.csv"
        f.write_text(f"input,image,label\nx,{name}.png,Pneumonia\n")
        res = runner.invoke(app, ["--db", db_url, "import", "csv", str(f), "--task", "rad"])
        assert res.exit_code == code, res.stderr
        if code:
            assert res.stderr.splitlines() == [
                f"error: over.csv:2: over.png: {MAX_FRAMES + 1} frames is more than the {MAX_FRAMES} frame limit "
                "(a radiograph is one picture)"]


def test_image_pixels_at_and_one_over() -> None:
    w = 10_000
    assert MAX_PIXELS % w == 0
    assert open_image(_png((w, MAX_PIXELS // w), mode="1")).size == (w, MAX_PIXELS // w)
    with pytest.raises(ImageRejected, match=f"more than the {MAX_PIXELS:,} pixel limit"):
        open_image(_png((w + 1, MAX_PIXELS // w), mode="1"))


def test_dicom_frames_at_and_one_over(engine: Engine, tmp_path: Path) -> None:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    from pxp.data.importers.dicom import import_dicom

    def save(path: Path, frames: int) -> None:
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
        meta.MediaStorageSOPInstanceUID = uid = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID, ds.Modality = meta.MediaStorageSOPClassUID, uid, "DX"
        ds.Rows, ds.Columns, ds.NumberOfFrames = 8, 8, frames
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
        ds.PixelData = np.arange(64 * frames, dtype=np.uint16).tobytes()
        ds.save_as(path, enforce_file_format=True)

    over, ok = tmp_path / "over", tmp_path / "ok"
    over.mkdir()
    ok.mkdir()
    save(over / "many.dcm", MAX_FRAMES + 1)
    with pytest.raises(ImportProblems) as info:
        import_dicom(engine, over, name="many", label="x")
    assert info.value.problems == [f"many.dcm: {MAX_FRAMES + 1} frames is more than the {MAX_FRAMES} frame "
                                   "limit (a radiograph is one picture)"]
    save(ok / "four.dcm", MAX_FRAMES)
    import_dicom(engine, ok, name="four", label="x")
    with DB(engine) as db:
        assert len(db.exec(select(Instance)).all()) == 1


def test_sandbox_timeout_and_crash_cost_one_call() -> None:
    """A call that hangs or kills its worker is one ChemFailed; the next call works."""
    import os

    with pytest.raises(ChemFailed, match=r"longer than the 0\.5 s limit"):
        run_sandboxed(time.sleep, 30, timeout=0.5)
    with pytest.raises(ChemFailed, match="worker process stopped"):
        run_sandboxed(os.abort)
    assert run_sandboxed(len, "abc") == 3
    from pxp.data.chem import InvalidSmiles
    from pxp.data.render import molecule_drawing

    with pytest.raises(InvalidSmiles, match="not a valid SMILES"):
        run_sandboxed(molecule_drawing, "C1CC", 100, 80)
    svg, props = run_sandboxed(molecule_drawing, TARGET, 200, 140)
    assert svg.startswith("<?xml") and props["formula"] == "C8H9NO2"
