"""Quiet retries (docs/operations.md, Troubleshooting): a database fault a run waits out is one line when the wait
begins and one when the repetition runs again, not a line a try; the run then finishes as if nothing happened."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from pxp.running.pxp.controlled.progress import PlainProgress
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.schema import upgrade
from pxp.storage.store import make_engine
from tests.factories import make_rad
from tests.running.test_resume import _cfg


def test_a_full_disk_waited_out_is_two_lines_per_repetition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PXP_DB_RETRY_S", "60")
    url = f"sqlite:///{tmp_path / 'run.db'}"
    clean = make_engine(url)
    upgrade(clean)
    make_rad(clean, per_label=4)
    exp = create_experiment(clean, _cfg(), name="Q")
    pages = int(clean.connect().exec_driver_sql("PRAGMA page_count").scalar() or 0)
    clean.dispose()
    engine = make_engine(url)
    full = threading.Event()
    checkouts = [0]

    @event.listens_for(engine, "checkout")
    def limit(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        """A disk that fills once the run is under way and is freed 3 s later (SQLite's own size limit)."""
        checkouts[0] += 1
        if checkouts[0] == 40:
            full.set()
            threading.Timer(3.0, full.clear).start()
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA max_page_count = {pages + 3 if full.is_set() else 1073741823}")
        cur.close()

    out = io.StringIO()
    started = time.monotonic()
    outcome = run_experiment(engine, exp.id or 0, observer=PlainProgress(engine, exp.id or 0, out))
    engine.dispose()
    assert outcome.status == "finished", outcome
    assert time.monotonic() - started >= 3  # the fault was met and waited out
    lines = out.getvalue().splitlines()
    for rep in (1, 2):
        mine = [ln for ln in lines if ln.startswith(f"rep {rep}: ")]
        assert sum("sessions done, running" in ln for ln in mine) == 1, mine
        waits = [ln for ln in mine if "waiting up to 60 s" in ln]
        backs = [ln for ln in mine if "the database is back, running again" in ln]
        assert len(waits) <= 1 and len(backs) == len(waits), mine
        assert all(f"the database {tmp_path / 'run.db'} failed: the disk is full" in ln for ln in waits), waits
    assert any("waiting up to 60 s" in ln for ln in lines), lines


def test_the_docs_name_exactly_the_faults_that_are_waited_out() -> None:
    """docs/operations.md and pxp.storage.faults agree on which faults a run waits out; a read-only file is not one."""
    from pxp.storage import faults

    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    bullet = doc.split("**A lost database pauses a run.**", 1)[1].split("\n- ", 1)[0]
    waited, rest = bullet.split("pauses at once", 1)[0].split("Every other fault", 1)
    for phrase in faults._TRANSIENT:
        assert " ".join(phrase.split()) in " ".join(waited.split()), phrase
    assert "the database is read-only" in " ".join(rest.split()) or "read-only" in bullet.split("Every other")[1]
    assert "the database is read-only" not in faults._TRANSIENT
