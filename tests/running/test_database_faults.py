"""Database faults pause a run, they do not leak (docs/operations.md, Troubleshooting): a run that loses its
database waits it out for a bounded time (resuming the repetition from what is stored), then pauses with
one line naming the database and the fault and one line with `--resume`; no driver text, SQL statement
or stored value reaches the user; `--resume` ends with the tables of a run that never met the fault."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.schema import upgrade
from pxp.storage.store import make_engine
from pxp.storage.tables import Message
from tests.factories import make_rad
from tests.running.test_resume import PXP, ROOT, SUBPROCESS_LATENCY, _cfg, _copy, _tables, reference  # noqa: F401

LEAKS = ("[SQL", "[parameters", "Traceback", "sqlalche.me", "psycopg.", "sqlite3", "Error", "Frontal", "Case ", "<")


def _cutter(admin: Engine, database: str, stop: threading.Event, every: float) -> None:
    """Cut every connection to `database` (pg_terminate_backend) every `every` seconds until `stop`."""
    while not stop.is_set():
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = :d AND pid <> pg_backend_pid()"), {"d": database})
            conn.commit()
        stop.wait(every)


@pytest.mark.long
@pytest.mark.postgres
@pytest.mark.parametrize("retry", ["0", "30"])
def test_cut_connections_pause_in_one_line_or_are_waited_out(pg_url: str, tmp_path: Path, retry: str,
                                                             reference: tuple[str, Any]) -> None:  # noqa: F811
    e = make_engine(pg_url)
    upgrade(e)
    make_rad(e, per_label=4)
    admin = make_engine(pg_url.rsplit("/", 1)[0] + "/postgres")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PXP_DB_RETRY_S": retry}
    args = [*PXP, "--db", pg_url, "run", "--dataset", "toy-rad", "--split", "train", "--reps", "2", "--seed", "2",
            "--learn", "--eval-at-start", "--sim-accuracy", "0.4", "--sim-adopt", "0.2", "--sim-mislead", "0.3",
            "--sim-latency", "0.3", "--name", "X", "--no-progress"]  # slow enough to be cut mid-run
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        with DB(e) as s:
            if len(s.exec(select(Message.id)).all()) >= 4:
                break
        time.sleep(0.05)
    stop = threading.Event()
    cutter = threading.Thread(target=_cutter, args=(admin, e.url.database, stop, 0.5 if retry == "0" else 3.0))
    cutter.start()
    try:
        if retry == "0":  # no waiting: the run pauses at the first cut
            _out, errs = proc.communicate(timeout=120)
        else:  # cut three times, then the database stays: the run waits it out and finishes
            time.sleep(8)
            stop.set()
            _out, errs = proc.communicate(timeout=180)
    finally:
        stop.set()
        cutter.join()
    lines = errs.strip().splitlines()
    assert not [ln for ln in lines if any(leak in ln for leak in LEAKS)], errs
    if retry == "0" and proc.returncode == 1:  # the run finished; its report was cut on every try
        assert len(lines) == 1 and lines[0].startswith("error: 'X' finished, but its report could not be read: "
                                                       "the database "), errs
        assert lines[0].endswith("show it with `pxp report X`"), errs
    elif retry == "0" and proc.returncode != 0:  # a cut inside a write pauses at once (a cut idle connection
        # is replaced by the pool's pre-ping unseen: then the run simply finishes)
        assert proc.returncode == 2, errs
        paused = [ln for ln in lines if ln.startswith("paused:")]
        assert paused and all(f"the database {e.url.render_as_string(hide_password=True)} failed: " in ln
                              for ln in paused), errs
        assert lines[-1] == f"resume with: pxp --db {pg_url} run --resume X", errs
        res = subprocess.run([*PXP, "--db", pg_url, "run", "--resume", "X", "--no-progress"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
    else:
        assert proc.returncode == 0, errs
    assert _tables(e, "X") == reference[1]
    e.dispose()
    admin.dispose()


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_full_or_read_only_sqlite_file_pauses_then_resumes(tmp_path: Path, fault: str,
                                                             reference: tuple[str, Any],  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PXP_DB_RETRY_S", "1")
    url = f"sqlite:///{tmp_path / 'run.db'}"
    clean = make_engine(url)
    upgrade(clean)
    make_rad(clean, per_label=4)
    exp = create_experiment(clean, _cfg(), name="X")
    pages = clean.connect().exec_driver_sql("PRAGMA page_count").scalar()
    clean.dispose()
    broken = make_engine(url)

    checkouts = [0]

    @event.listens_for(broken, "checkout")
    def limit(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        """The fault, set by SQLite itself on every connection once the run is under way."""
        checkouts[0] += 1
        if checkouts[0] < 40:
            return
        cur = dbapi_conn.cursor()
        if fault == "full":
            cur.execute(f"PRAGMA max_page_count = {int(pages or 0) + 3}")
        else:
            cur.execute("PRAGMA query_only = 1")
        cur.close()

    outcome = run_experiment(broken, exp.id or 0)
    broken.dispose()
    assert outcome.status == "paused"
    phrase = "the disk is full" if fault == "full" else "the database is read-only"
    assert all(note and note.startswith(f"the database {tmp_path / 'run.db'} failed: {phrase}")
               for note in outcome.paused.values()), outcome.paused
    again = make_engine(url)
    assert run_experiment(again, exp.id or 0).status == "finished"
    assert _tables(again, "X") == reference[1]
    again.dispose()


@pytest.mark.long
@pytest.mark.postgres
def test_a_worker_whose_connections_are_cut_says_so_and_keeps_going(pg_url: str, tmp_path: Path,
                                                                    reference: tuple[str, Any]) -> None:  # noqa: F811
    """`pxp worker` and a distributed run while the database's connections are cut: one line per loss (no
    driver text, no empty error), and the run, resumed if it paused, ends with the in-process run's tables."""
    e = make_engine(pg_url)
    upgrade(e)
    make_rad(e, per_label=4)
    admin = make_engine(pg_url.rsplit("/", 1)[0] + "/postgres")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PXP_DB_RETRY_S": "5"}
    worker = subprocess.Popen([*PXP, "--db", pg_url, "worker", "--stalled-after", "2", "--name", "w"], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run_args = [*PXP, "--db", pg_url, "run", "--dataset", "toy-rad", "--split", "train", "--reps", "2", "--seed", "2",
                "--learn", "--eval-at-start", "--sim-accuracy", "0.4", "--sim-adopt", "0.2", "--sim-mislead", "0.3",
                "--sim-latency", "0.2", "--name", "X", "--no-progress", "--distributed"]
    stop = threading.Event()
    errs = ""
    try:
        run = subprocess.Popen(run_args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _count_messages(e) < 5:  # the repetitions are under way
            time.sleep(0.1)
        cutter = threading.Thread(target=_cutter, args=(admin, e.url.database, stop, 1.0))
        cutter.start()
        time.sleep(4)
        stop.set()
        cutter.join()
        _, run_errs = run.communicate(timeout=300)
        assert run.returncode in (0, 2), run_errs
        assert not [ln for ln in run_errs.splitlines() if any(leak in ln for leak in LEAKS[:5])], run_errs
        if run.returncode == 2:
            again = subprocess.run([*PXP, "--db", pg_url, "run", "--resume", "X", "--no-progress", "--distributed"],
                                   env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
            assert again.returncode == 0, again.stderr
    finally:
        stop.set()
        worker.terminate()
        _, errs = worker.communicate(timeout=60)
    lines = [ln for ln in errs.strip().splitlines() if ln.strip()]
    assert not [ln for ln in lines if any(leak in ln for leak in LEAKS[:5])], errs
    assert all(not ln.rstrip().endswith(":") for ln in lines), errs
    assert _tables(e, "X") == reference[1]
    e.dispose()
    admin.dispose()


def _count_messages(engine: Engine) -> int:
    with DB(engine) as s:
        return len(s.exec(select(Message.id)).all())
