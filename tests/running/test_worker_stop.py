"""Stop means stop (docs/operations.md, Workers): SIGTERM or SIGINT to `pxp worker` ends it within its bound
(STOP_S), whatever the database is doing, its connections cut again and again included; a second signal ends it
at once; a worker that cannot reach its database at start tries again, one line per try, naming the database."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from pxp.cli.worker import STOP_S
from pxp.storage.schema import upgrade
from pxp.storage.store import make_engine
from tests.factories import make_rad
from tests.running.test_database_faults import LEAKS, _count_messages, _cutter
from tests.running.test_resume import PXP, ROOT

#: a generous bound: the worker's own (STOP_S) plus an interpreter's exit on a busy 2-core machine
BOUND_S = STOP_S + 20


def _worker(url: str, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([*PXP, "--db", url, "worker", "--stalled-after", "2", *extra], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    """stderr lines up to the first that holds `needle` (read on a thread, so a silent process cannot block)."""
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if needle in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), lines
    return lines


@pytest.fixture
def study(pg_url: str) -> Engine:
    e = make_engine(pg_url)
    upgrade(e)
    make_rad(e, per_label=4)
    return e


@pytest.mark.long
@pytest.mark.postgres
def test_a_worker_told_to_stop_while_its_connections_are_cut_stops(study: Engine, pg_url: str,
                                                                   tmp_path: Path) -> None:
    """Five tries: a worker serving a distributed run, its backends terminated every 0.3 s, gets SIGTERM at a
    different moment each time (mid-reconnection or mid-job); it exits 0 within the bound and never goes back
    to serving after saying it stops."""
    admin = make_engine(pg_url.rsplit("/", 1)[0] + "/postgres")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([*PXP, "--db", pg_url, "run", "--dataset", "toy-rad", "--split", "train", "--reps", "2",
                            "--sim-latency", "0.3", "--name", "X", "--no-progress", "--distributed"],
                           env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for attempt in range(5):
            worker = _worker(pg_url, tmp_path, "--name", f"w{attempt}")
            _wait_for_line(worker, "waiting for repetitions", 60)
            deadline = time.monotonic() + 30
            while attempt == 0 and _count_messages(study) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)  # the first try: a job is under way
            stop = threading.Event()
            cutter = threading.Thread(target=_cutter, args=(admin, study.url.database, stop, 0.3))
            cutter.start()
            try:
                time.sleep(0.5 + 0.7 * attempt)
                started = time.monotonic()
                worker.send_signal(signal.SIGTERM)
                _, errs = worker.communicate(timeout=BOUND_S)
                took = time.monotonic() - started
            finally:
                stop.set()
                cutter.join()
            assert worker.returncode == 0, errs
            assert took < BOUND_S
            after = errs.split("stopping:", 1)[1] if "stopping:" in errs else errs
            assert "waiting for repetitions" not in after and "trying again" not in after, errs
            assert errs.strip().splitlines()[-1].startswith(f"pxp worker w{attempt}: stopped"), errs
            assert "the database failed" not in errs and "Exception(" not in errs, errs  # named, no repr
            assert not [ln for ln in errs.splitlines() if any(leak in ln for leak in LEAKS[:5])], errs
    finally:
        run.kill()
        run.wait(timeout=30)
        admin.dispose()


@pytest.mark.postgres
def test_a_second_signal_stops_the_worker_at_once(study: Engine, pg_url: str, tmp_path: Path) -> None:
    worker = _worker(pg_url, tmp_path)
    _wait_for_line(worker, "waiting for repetitions", 60)
    worker.send_signal(signal.SIGINT)
    worker.send_signal(signal.SIGINT)
    _, errs = worker.communicate(timeout=30)
    assert worker.returncode in (0, 130), errs  # stopped already, or at once by the second signal
    assert "Traceback" not in errs and "KeyboardInterrupt" not in errs


def test_a_worker_that_cannot_reach_its_database_at_start_tries_again(tmp_path: Path) -> None:
    url = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"
    worker = _worker(url, tmp_path)
    lines = _wait_for_line(worker, "trying again", 60)
    worker.send_signal(signal.SIGTERM)
    _, errs = worker.communicate(timeout=BOUND_S)
    assert worker.returncode == 0, errs
    first = lines[-1]
    assert "the database postgresql+psycopg://postgres@127.0.0.1:1/nowhere failed: " in first, first
    assert first.endswith("trying again in 5 s"), first
    assert errs.strip().splitlines()[-1].startswith("pxp worker: stopped"), errs
    assert "Traceback" not in errs + "\n".join(lines)
