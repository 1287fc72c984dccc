"""Generic CSV/JSONL import with a column mapping; imports at dataset scale (docs/development.md
"Imports at dataset scale": one pass, flat memory, all-or-nothing even when killed mid-import) and
the text rule on the row path (pxp.protocols.text)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.generic import import_table, parse_mapping
from pxp.storage.store import count_rows
from pxp.storage.tables import Asset, Dataset, Instance, Session


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


ROOT = Path(__file__).resolve().parents[2]


def write_csv(path: Path, n: int, start: int = 0) -> Path:
    with path.open("w") as fh:
        fh.write("key,input,label,explanation\n")
        for i in range(start, start + n):
            fh.write(f"r{i},a finding in case {i},L{i % 3},because the lobe {i} shows it\n")
    return path


def test_a_jsonl_column_first_seen_late_maps_as_if_read_first(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "late.jsonl"
    rows = [{"input": "a"}, {"input": "b", "label": "L"}, {"input": "c", "label": "M", "note": "x"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = import_table(engine, f)
    assert res.added == 3
    with DB(engine) as db:
        got = [(i.payload, i.reference_prediction, i.meta)
               for i in db.exec(select(Instance).order_by(Instance.ordinal))]
    assert got == [("a", "", {}), ("b", "L", {}), ("c", "M", {"note": "x"})]


def test_reimport_counts_unchanged_updated_and_added(any_engine: Engine, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "t.csv", 12_000)
    assert import_table(any_engine, f).added == 12_000
    text = f.read_text().replace("r5,a finding in case 5,", "r5,another finding,")
    f.write_text(text + "new1,x,L0,y\n")
    again = import_table(any_engine, f)
    assert (again.added, again.updated, again.unchanged) == (1, 1, 11_999)
    with DB(any_engine) as db:
        r5 = db.exec(select(Instance).where(Instance.key == "r5")).one()
        new = db.exec(select(Instance).where(Instance.key == "new1")).one()
    assert r5.payload == "another finding" and (r5.ordinal, new.ordinal) == (6, 12_001)


def test_reimport_refuses_other_content_under_a_session_in_a_later_batch(any_engine: Engine,
                                                                       tmp_path: Path) -> None:
    """On PostgreSQL a re-import is compared batch by batch as it is sent: a row changed in a later
    batch, on an instance a stored session refers to, is still refused, and nothing changes."""
    from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator

    f = write_csv(tmp_path / "t.csv", 12_000)
    import_table(any_engine, f, name="t")
    with DB(any_engine) as db:
        late = db.exec(select(Instance).where(Instance.key == "r11000")).one()
    eid = create_live_experiment(any_engine, dataset="t", case_lists={"reader": ["r11000"]})
    assert claim_next(any_engine, experiment_id=eid, annotator_id=ensure_annotator(any_engine, name="reader"))
    f.write_text(f.read_text().replace("a finding in case 11000,", "another finding,")
                 .replace("a finding in case 3,", "a third finding,"))
    with pytest.raises(ImportProblems) as info:
        import_table(any_engine, f, name="t")
    assert info.value.problems == ["dataset 't': key 'r11000' already holds other content, and stored sessions "
                                   "were run on it; import under a new --name (a new version of the dataset)"]
    with DB(any_engine) as db:
        assert db.exec(select(Instance.payload).where(Instance.key == "r3")).one() == "a finding in case 3"
        assert db.get(Instance, late.id).payload == "a finding in case 11000"  # type: ignore[union-attr]


CHILD = """
import sys
from pxp.storage.store import make_engine
from pxp.data.importers.generic import import_table
engine = make_engine(sys.argv[1])
def report(rows, fraction):
    if rows:
        print("stored", rows, flush=True)
        sys.stdin.readline()  # wait here, mid-import, until the test kills the process
import_table(engine, sys.argv[2], progress=report)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_killed_mid_import_leaves_nothing_and_the_next_import_succeeds(
        any_engine: Engine, tmp_path: Path, how: signal.Signals) -> None:
    f = write_csv(tmp_path / "big.csv", 12_000)
    url = any_engine.url.render_as_string(hide_password=False)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, str(f)], cwd=ROOT, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None and child.stdin is not None
    line = child.stdout.readline()
    assert line.startswith("stored 5000"), line  # a first batch went to the database
    child.send_signal(how)
    # the waiting readline returns: the kernel may hand SIGINT to the writer thread, and Python raises
    # KeyboardInterrupt in the main thread only once it runs again (signal module docs, "Signals and threads")
    child.stdin.close()
    child.wait(timeout=30)
    with DB(any_engine) as db:
        assert (count_rows(db, Dataset), count_rows(db, Instance)) == (0, 0)
    assert import_table(any_engine, f).added == 12_000


def _peak(engine: Engine, path: Path, name: str, importer: Callable[..., object] = import_table) -> int:
    tracemalloc.start()
    try:
        importer(engine, path, name=name)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_file_grows(engine: Engine, tmp_path: Path) -> None:
    small = write_csv(tmp_path / "small.csv", 5_000)
    large = write_csv(tmp_path / "large.csv", 30_000)
    import_table(engine, write_csv(tmp_path / "warm.csv", 100), name="warm")  # first-use caches
    peak_small = _peak(engine, small, "small")
    peak_large = _peak(engine, large, "large")
    assert peak_large < peak_small * 1.25 + 256 * 1024, (peak_small, peak_large)


def test_a_file_of_bad_rows_keeps_its_first_problems_and_counts_the_rest_in_flat_memory(engine: Engine,
                                                                                       tmp_path: Path) -> None:
    from pxp.data.importers.common import KEPT_PROBLEMS, problem_count, shown_problems

    def bad(path: Path, n: int) -> Path:  # every row names an unknown split
        with path.open("w") as fh:
            fh.write("key,input,split\n")
            fh.writelines(f"r{i},case {i} with a longer text to make each problem line longer,spring\n"
                          for i in range(n))
        return path

    peaks = []
    for n in (5_000, 30_000):
        tracemalloc.start()
        try:
            with pytest.raises(ImportProblems) as info:
                import_table(engine, bad(tmp_path / f"bad{n}.csv", n), name=f"bad{n}")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        found = info.value.problems
        assert len(found) == KEPT_PROBLEMS and problem_count(found) == n
        assert found[0].startswith(f"bad{n}.csv:2: ") and found[-1].startswith(f"bad{n}.csv:{KEPT_PROBLEMS + 1}: ")
        assert shown_problems(found)[-1] == (f"... and {n - 20:,} more problems not shown (fix these and import "
                                             "again)")
        del info, found
    assert peaks[1] < peaks[0] * 1.25 + 256 * 1024, peaks
    with DB(engine) as db:
        assert count_rows(db, Dataset) == 0


def test_keys_equal_under_the_text_rule_are_one_key_repeated(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "k.csv"
    f.write_text("key,input\na,first\na\u200b,second\n b ,third\n", encoding="utf-8")
    res = import_table(engine, f)
    assert res.added == 3
    assert res.warnings == ["k.csv: key repeated, each row kept as its own instance (key#2, ...): a (lines 2, 3)"]
    assert [i.key for i in instances(engine)] == ["a", "a#2", "b"]


def test_a_nul_in_json_is_refused_with_its_line_and_field(any_engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "n.jsonl"
    f.write_text('{"input": "fine"}\n{"input": "x", "explanation": "a\\u0000b"}\n{"input": "y", "note": "\\u0007"}\n')
    with pytest.raises(ImportProblems) as info:
        import_table(any_engine, f)
    assert info.value.problems == [
        "n.jsonl:2: explanation: contains the control character U+0000 (NUL); remove it",
        "n.jsonl:3: note: contains the control character U+0007 (control character); remove it"]
    with DB(any_engine) as db:
        assert (count_rows(db, Dataset), count_rows(db, Instance)) == (0, 0)


def test_another_writer_during_an_import_on_sqlite(engine: Engine, tmp_path: Path) -> None:
    from pxp.storage.tables import Annotator

    def meanwhile(rows: int, fraction: float) -> None:
        if rows and fraction < 1.0:  # mid-import: another connection commits a write
            with DB(engine) as other:
                other.add(Annotator(name=f"a{rows}"))
                other.commit()

    res = import_table(engine, write_csv(tmp_path / "w.csv", 12_000), progress=meanwhile)
    assert res.added == 12_000
    with DB(engine) as db:
        assert count_rows(db, Annotator) >= 1


def test_a_csv_with_old_mac_line_ends_reads_as_before(engine: Engine, tmp_path: Path) -> None:
    f = tmp_path / "mac.csv"
    f.write_bytes(b'key,input\rk1,one\rk2,"two\rlines"\r')
    assert import_table(engine, f).added == 2
    assert [(i.key, i.payload) for i in instances(engine)] == [("k1", "one"), ("k2", "two\nlines")]


def write_transcripts(path: Path, sessions: int) -> Path:
    """Three messages a session, each session's lines apart (the file's order is not the sessions')."""
    with path.open("w") as fh:
        for j in range(1, 4):
            for s in range(sessions):
                fh.write(json.dumps({"session": f"s{s}", "instance": f"x{s}", "j": j,
                                     "sender": ("machine", "human", "machine")[j - 1],
                                     "tag": ("INIT", "RATIFY", "RATIFY")[j - 1], "prediction": "Pneumonia",
                                     "explanation": f"opacity in the lower lobe {s}"}) + "\n")
    return path


@pytest.mark.long
def test_transcript_memory_stays_flat_as_the_file_grows(engine: Engine, tmp_path: Path) -> None:
    from pxp.data.importers.transcripts import import_transcripts

    def run(db: Engine, path: Path, name: str) -> object:
        return import_transcripts(db, path, name=name, n=10, k=3)

    run(engine, write_transcripts(tmp_path / "warm.jsonl", 30), "warm")  # first-use caches
    peak_small = _peak(engine, write_transcripts(tmp_path / "small.jsonl", 600), "small", run)
    peak_large = _peak(engine, write_transcripts(tmp_path / "large.jsonl", 4_000), "large", run)
    assert peak_large < peak_small * 1.25 + 256 * 1024, (peak_small, peak_large)
    with DB(engine) as db:
        assert count_rows(db, Session) == 30 + 600 + 4_000
