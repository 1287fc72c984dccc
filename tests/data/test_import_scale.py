"""Imports at dataset scale (docs/development.md "Imports at dataset scale"): one pass, flat
memory, all-or-nothing even when the process is killed mid-import."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.generic import import_table
from pxp.storage.store import count_rows
from pxp.storage.tables import Dataset, Instance

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
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("stored 5000"), line  # a first batch went to the database
    child.send_signal(how)
    child.wait(timeout=30)
    with DB(any_engine) as db:
        assert (count_rows(db, Dataset), count_rows(db, Instance)) == (0, 0)
    assert import_table(any_engine, f).added == 12_000


def _peak(engine: Engine, path: Path, name: str) -> int:
    tracemalloc.start()
    try:
        import_table(engine, path, name=name)
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
