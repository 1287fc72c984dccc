"""Ketcher as the app serves it (pxp.app.annotate.ketcher; docs/annotating.md, "Drawing the
reactants"): a copy of streamlit-ketcher's build with its three start-up changes and nothing else, the
build as it is where they are not found, and the pre-fill as a molfile of the same molecules. That
this Ketcher starts, draws the pre-fill, opens its Salts and Solvents tab with pictures and applies
through Indigo is checked in a real browser (tests/browser/test_browser_chem.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import streamlit_ketcher
from rdkit import Chem

from pxp.app.annotate.ketcher import (
    INLINE_WORKER,
    LATER,
    OWN_WORKER,
    PREDRAW,
    WORKER_FILE,
    light_build,
)
from pxp.data.chem import InvalidSmiles, molfile, smiles_set

BUILD = Path(streamlit_ketcher.__file__).parent / "frontend"


def _chunk(build: Path) -> Path:
    return max((build / "static" / "js").glob("*.chunk.js"), key=lambda p: p.stat().st_size)


def test_the_light_build_makes_its_three_changes_and_nothing_else(tmp_path: Path) -> None:
    into = tmp_path / "frontend"
    assert light_build(BUILD, into) == ["salts and solvents drawn when opened", "Indigo's worker a file",
                                        "the chunk asked for at once"]
    big = _chunk(BUILD)
    before, after = big.read_text(encoding="utf-8"), (into / big.relative_to(BUILD)).read_text(encoding="utf-8")
    inline = INLINE_WORKER.search(before)
    assert inline is not None and PREDRAW in before
    assert PREDRAW not in after and INLINE_WORKER.search(after) is None
    assert len(after) < len(before) / 2, "the worker's base64 text is out of the chunk"
    # nothing else differs: the chunk with both changes undone is the package's
    assert after.replace(LATER, PREDRAW).replace(OWN_WORKER, inline.group(0)) == before
    # the worker's file holds what the build's loader made of the base64 text (read as Latin-1, first line dropped)
    source = base64.b64decode(inline.group(1)).decode("latin-1")
    worker = (into / WORKER_FILE).read_text(encoding="utf-8")
    assert worker == source[source.index("\n", 10) + 1:] and "WebAssembly.instantiate" in worker
    index = (into / "index.html").read_text(encoding="utf-8")
    assert index.replace(f'<link rel="preload" href="./static/js/{big.name}" as="script">', "") == (
        BUILD / "index.html").read_text(encoding="utf-8")
    # every other file as it was, without the source maps
    for p in BUILD.rglob("*"):
        if p.is_file() and p != big and p.name != "index.html":
            copy = into / p.relative_to(BUILD)
            assert (not copy.exists()) if p.suffix == ".map" else copy.read_bytes() == p.read_bytes(), p


def _fake_build(root: Path, chunk: str, index: str) -> Path:
    (root / "static" / "js").mkdir(parents=True)
    (root / "static" / "js" / "1.abc.chunk.js").write_text(chunk, encoding="utf-8")
    (root / "static" / "js" / "main.abc.js").write_text("main()", encoding="utf-8")
    (root / "index.html").write_text(index, encoding="utf-8")
    return root


def test_a_build_without_what_it_expects_is_served_as_it_is(tmp_path: Path) -> None:
    other = _fake_build(tmp_path / "other", "A1=function(U,F){U.slice(0,40).forEach(draw)}", "<html><body/></html>")
    assert light_build(other, tmp_path / "copy") == [] and not (tmp_path / "copy").exists()
    twice = _fake_build(tmp_path / "twice", PREDRAW + "a)};" + PREDRAW + "b)}", "<html><body/></html>")
    assert light_build(twice, tmp_path / "copy2") == [] and not (tmp_path / "copy2").exists()
    # an inline worker that is not the loader's (another head) is left where it is
    fake = base64.b64encode(b"/* something else */\nself.onmessage = () => {};").decode()
    worker = ("var W=function(U,F,Q){var R;return function(B){return R=R||e(U,F,Q),new Worker(R,B)}}"
              f'("{fake}",null,!1);')
    alone = _fake_build(tmp_path / "alone", worker + PREDRAW + "a)}", "<html><head></head></html>")
    assert light_build(alone, tmp_path / "copy3") == ["salts and solvents drawn when opened",
                                                      "the chunk asked for at once"]
    assert worker in (tmp_path / "copy3" / "static" / "js" / "1.abc.chunk.js").read_text(encoding="utf-8")
    assert not (tmp_path / "copy3" / WORKER_FILE).exists()


@pytest.mark.parametrize("smiles", ["CC(=O)OC(C)=O.Nc1ccc(O)cc1", "c1cc[nH]c1, [NH4+].[Cl-]", "C[C@H](N)C(=O)O"])
def test_the_prefill_molfile_holds_the_same_molecules(smiles: str) -> None:
    block = molfile(smiles)
    assert "V2000" in block.splitlines()[3]
    mol = Chem.MolFromMolBlock(block)
    assert mol is not None and smiles_set(Chem.MolToSmiles(mol)) == smiles_set(smiles)


def test_a_prefill_rdkit_cannot_read_is_refused_as_smiles_are() -> None:
    with pytest.raises(InvalidSmiles, match="not a valid SMILES"):
        molfile("CC(=O.O")
