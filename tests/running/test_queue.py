"""Repetitions over `pxp worker` processes on PostgreSQL (docs/operations.md, Workers; pxp.running.workers.queue).

Real PostgreSQL, real procrastinate, real worker subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from pxp.analysis.report import report_json
from pxp.analysis.validate import validate
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.workers.queue import enqueue, ensure_schema, jobs
from pxp.storage.store import make_engine, upgrade
from tests.factories import make_rad
from tests.running.test_runner import HARSH, d_table, e_table, m_table

ROOT = Path(__file__).resolve().parents[2]
PXP = [sys.executable, "-c", "from pxp.cli.main import main; main()"]  # the console script's entry point
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
STALLED = 2.0  # seconds without a heartbeat before a dead worker's job is retried (tests only)
# kill -9 a worker mid-repetition this many times: 3 in the suite (each kill is the same event: a job lost
# mid-repetition, retried elsewhere); bench/bench_kill9.py runs the full campaign of 10
KILLS = int(os.environ.get("PXP_TEST_KILLS", "3"))

RUN_FLAGS = ["--dataset", "toy-rad", "--split", "train", "--seed", "2", "--learn", "--eval-at-start",
             "--sim-accuracy", str(HARSH["accuracy"]), "--sim-adopt", str(HARSH["adopt"]),
             "--sim-mislead", str(HARSH["mislead"])]


def _cfg(reps: int, latency: float = 0.0) -> Any:
    from pxp.running.pxp.config import RunConfig

    return RunConfig(dataset="toy-rad", split="train", reps=reps, seed=2, learn=True, eval_at_start=True,
                     simulated={**HARSH, "latency": latency})


@pytest.fixture
def pg(pg_url: str) -> Iterator[tuple[str, Engine]]:
    e = make_engine(pg_url)
    upgrade(e)
    make_rad(e, per_label=4)
    yield pg_url, e
    e.dispose()


def _tables(engine: Engine, name: str) -> tuple[Any, ...]:
    from sqlmodel import Session as DB

    from pxp.storage.store import find_experiment

    with DB(engine) as db:
        exp = find_experiment(db, name_or_id=name)
    assert exp is not None
    return m_table(engine, exp), d_table(engine, exp), e_table(engine, exp)


def _reference(engine: Engine, reps: int) -> tuple[Any, ...]:
    exp = create_experiment(engine, _cfg(reps), name="REF")
    assert run_experiment(engine, exp.id or 0).status == "finished"
    return _tables(engine, "REF")


def _worker(url: str, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*PXP, "--db", url, "worker", "--stalled-after", str(STALLED), "--name", name],
                            env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def _report(engine: Engine, name: str) -> dict[str, Any]:
    rep = report_json(engine, name)
    rep.pop("experiment")
    return rep


@pytest.mark.postgres
def test_schema_is_installed_once_and_a_repetition_is_queued_once(pg: tuple[str, Engine]) -> None:
    _, engine = pg
    assert ensure_schema(engine) is True
    assert ensure_schema(engine) is False
    exp = create_experiment(engine, _cfg(3), name="Q")
    first = enqueue(engine, exp.id or 0)
    again = enqueue(engine, exp.id or 0)  # the queueing lock keeps the queued jobs, adds none
    assert sorted(first) == [1, 2, 3]
    assert first == again
    assert {st for _, st in jobs(engine, exp.id or 0).values()} == {"todo"}
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from procrastinate_jobs")).scalar() == 3


@pytest.mark.long
@pytest.mark.postgres
def test_distributed_run_over_two_workers_equals_the_in_process_run(pg: tuple[str, Engine]) -> None:
    url, engine = pg
    ref = _reference(engine, 3)
    workers = [_worker(url, "w1"), _worker(url, "w2")]
    try:
        res = subprocess.run([*PXP, "--db", url, "run", *RUN_FLAGS, "--reps", "3", "--name", "D", "--distributed",
                              "--format", "json", "--no-progress"],
                             env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        _stop(workers)
    assert res.returncode == 0, res.stderr
    assert _tables(engine, "D") == ref
    assert json.loads(res.stdout)["metrics"] == _report(engine, "REF")["metrics"]  # Table 1
    assert _report(engine, "D") == _report(engine, "REF")
    assert {st for _, st in jobs(engine, _exp_id(engine, "D")).values()} == {"succeeded"}
    with engine.connect() as conn:
        assert conn.execute(text("select status from experiment where name = 'D'")).scalar() == "finished"


def _exp_id(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("select id from experiment where name = :n"), {"n": name}).scalar_one())


def _busy(engine: Engine, experiment_id: int) -> int:
    """Jobs of the experiment running in a worker whose heartbeat is fresh (it is mid-repetition)."""
    q = text(
        "select count(*) from procrastinate_jobs j join procrastinate_workers w on w.id = j.worker_id "
        "where j.status = 'doing' and (j.args->>'experiment_id')::int = :e "
        "and w.last_heartbeat > now() - make_interval(secs => :s)"
    )
    with engine.connect() as conn:
        return int(conn.execute(q, {"e": experiment_id, "s": STALLED / 2}).scalar_one())


def _messages(engine: Engine, experiment_id: int) -> int:
    q = text("select count(*) from message m join session s on s.id = m.session_id "
             "join run r on r.id = s.run_id where r.experiment_id = :e")
    with engine.connect() as conn:
        return int(conn.execute(q, {"e": experiment_id}).scalar_one())


@pytest.mark.long
@pytest.mark.postgres
@pytest.mark.timeout(1500)
def test_kill_9_workers_mid_repetition_loses_and_repeats_nothing(pg: tuple[str, Engine]) -> None:
    url, engine = pg
    ref = _reference(engine, 2)
    exp = create_experiment(engine, _cfg(2, latency=1.2), name="K")  # outlives the kills, even on a loaded machine
    eid = exp.id or 0
    ensure_schema(engine)  # before polling its tables (the workers and the waiter install it too)
    workers = [_worker(url, "w0"), _worker(url, "w1")]
    waiter = subprocess.Popen([*PXP, "--db", url, "run", "--resume", "K", "--distributed", "--no-progress"],
                              env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kills, last = 0, -1
    deadline = time.monotonic() + 600
    try:
        while kills < KILLS and waiter.poll() is None and time.monotonic() < deadline:
            n = _messages(engine, eid)
            # both repetitions running in live workers, and a message stored since the last kill
            if _busy(engine, eid) == 2 and n > last:
                victim = workers[kills % 2]
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=10)
                assert victim.returncode == -signal.SIGKILL
                workers[kills % 2] = _worker(url, f"w{kills + 2}")
                kills, last = kills + 1, n
            time.sleep(0.05)
        out, err = waiter.communicate(timeout=600)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        _stop(workers)
    assert kills == KILLS, f"the run ended after {kills} kills: {err.decode()[-500:]}"
    assert waiter.returncode == 0, err.decode()[-2000:]
    assert b"Total sessions" in out
    assert _tables(engine, "K") == ref
    assert _report(engine, "K") == _report(engine, "REF")
    assert validate(engine, experiment_id=eid)[1] == []
    res = subprocess.run([*PXP, "--db", url, "validate", "--experiment", "K"],
                         env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _most_attempts(engine, eid) >= 2  # a job was retried (a finished attempt counts one)


def test_distributed_and_worker_on_sqlite_say_so_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pxp.db'}"
    e = make_engine(url)
    upgrade(e)
    make_rad(e, per_label=1)
    e.dispose()
    for args in (["run", *RUN_FLAGS, "--reps", "1", "--distributed", "--no-progress"], ["worker"]):
        res = subprocess.run([*PXP, "--db", url, *args], env=ENV, cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 1, res.stdout + res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "PostgreSQL" in lines[0], res.stderr
        assert "Traceback" not in res.stderr
    e = make_engine(url)
    with e.connect() as conn:
        assert conn.execute(text("select count(*) from experiment")).scalar() == 0  # refused before creating one
    e.dispose()


def _most_attempts(engine: Engine, experiment_id: int) -> int:
    q = text("select max(attempts) from procrastinate_jobs where (args->>'experiment_id')::int = :e")
    with engine.connect() as conn:
        return int(conn.execute(q, {"e": experiment_id}).scalar_one())


def _wait_until(cond: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)

def _distributed_waiter(url: str, name: str) -> subprocess.Popen[str]:
    """`pxp run ... --reps 2 --name NAME --distributed --no-progress` in the background (text pipes); its
    database connections are named `waiter-NAME` (libpq's PGAPPNAME) so its polls can be watched."""
    return subprocess.Popen([*PXP, "--db", url, "run", *RUN_FLAGS, "--reps", "2", "--name", name, "--distributed",
                             "--no-progress"], env={**ENV, "PGAPPNAME": f"waiter-{name}"}, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _polls(engine: Engine, app_name: str) -> Callable[[], int]:
    """A counter of the database round trips seen from the connections named `app_name` (each changes
    its pg_stat_activity.state_change), sampled whenever the returned function is called."""
    seen: set[Any] = set()

    def count() -> int:
        with engine.connect() as conn:
            seen.update(r for (r,) in conn.execute(text(
                "select state_change from pg_stat_activity where application_name = :a"), {"a": app_name}))
        return len(seen)

    return count


def _interrupt_after(waiter: subprocess.Popen[Any], warning: str, seen: Callable[[], str],
                     polls: Callable[[], int], still: Callable[[], bool] = lambda: True) -> None:
    """Wait for `warning` in what the waiter printed, then for it to poll the database a few more times
    (no second warning, still waiting), then Ctrl-C it."""
    try:
        _wait_until(lambda: warning in seen() or waiter.poll() is not None, timeout=120)
        after = polls()
        _wait_until(lambda: polls() >= after + 6 or waiter.poll() is not None, timeout=120)
        assert waiter.poll() is None, seen()
        assert still(), seen()
        waiter.send_signal(signal.SIGINT)
        waiter.wait(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()


@pytest.mark.long
@pytest.mark.postgres
def test_ctrl_c_pauses_every_repetition_and_sigterm_hands_a_repetition_to_another_worker(
    pg: tuple[str, Engine],
) -> None:
    url, engine = pg
    ref = _reference(engine, 2)
    eid = create_experiment(engine, _cfg(2, latency=0.2), name="C").id or 0
    ensure_schema(engine)
    workers = [_worker(url, "w0"), _worker(url, "w1")]
    resume = [*PXP, "--db", url, "run", "--resume", "C", "--distributed", "--no-progress"]
    try:
        waiter = subprocess.Popen(resume, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_until(lambda: _busy(engine, eid) == 2 and _messages(engine, eid) >= 6)
        waiter.send_signal(signal.SIGINT)  # Ctrl-C: every repetition pauses, as in-process
        _, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 130, err.decode()
        assert "paused" in err.decode()
        assert all(st in ("succeeded", "cancelled", "aborted") for _, st in jobs(engine, eid).values())
        with engine.connect() as conn:
            statuses = {s for (s,) in conn.execute(text("select status from run where experiment_id = :e"),
                                                   {"e": eid})}
        assert statuses == {"paused"}
        assert all(p.poll() is None for p in workers)  # the workers live on

        waiter = subprocess.Popen(resume, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        n = _messages(engine, eid)
        _wait_until(lambda: _busy(engine, eid) == 2 and _messages(engine, eid) >= n + 6)
        workers[0].send_signal(signal.SIGTERM)  # this worker stops; its repetition goes back to the queue
        assert workers[0].wait(timeout=60) == 0
        out, err = waiter.communicate(timeout=300)
    finally:
        _stop(workers)
    assert waiter.returncode == 0, err.decode()[-2000:]
    assert b"Total sessions" in out
    assert _tables(engine, "C") == ref
    assert validate(engine, experiment_id=eid)[1] == []
    assert _most_attempts(engine, eid) >= 2  # the stopped worker's job was retried by the other


@pytest.mark.postgres
def test_distributed_run_without_a_worker_warns_once_and_keeps_waiting(pg: tuple[str, Engine]) -> None:
    url, engine = pg
    waiter = _distributed_waiter(url, "W")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(waiter.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    warning = "no pxp worker is running; start one with `pxp worker`"
    _interrupt_after(waiter, warning, lambda: "".join(lines), _polls(engine, "waiter-W"),
                     lambda: {st for _, st in jobs(engine, _exp_id(engine, "W")).values()} == {"todo"})
    reader.join(timeout=10)
    assert waiter.returncode == 130, "".join(lines)
    assert sum(warning in ln for ln in lines) == 1, "".join(lines)
    assert "Traceback" not in "".join(lines)


@pytest.mark.postgres
def test_the_no_worker_warning_goes_above_the_live_progress_display_once(pg: tuple[str, Engine]) -> None:
    """On a terminal the warning is printed through the rich display's console, not under its bars."""
    import pty

    url, engine = pg
    master, slave = pty.openpty()
    waiter = subprocess.Popen([*PXP, "--db", url, "run", *RUN_FLAGS, "--reps", "2", "--name", "T", "--distributed"],
                              env={**ENV, "COLUMNS": "160", "TERM": "xterm", "PGAPPNAME": "waiter-T"}, cwd=ROOT,
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    raw = bytearray()

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            raw.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    warning = "warning: no pxp worker is running; start one with `pxp worker`"
    _interrupt_after(waiter, warning, lambda: raw.decode(errors="replace"), _polls(engine, "waiter-T"))
    reader.join(timeout=10)
    os.close(master)
    shown = raw.decode(errors="replace")
    assert waiter.returncode == 130, shown
    assert "\x1b[" in shown and "rep 2" in shown  # the live display (cursor moves), one row per repetition
    assert shown.count(warning) == 1, shown
    assert "Traceback" not in shown
    assert {st for _, st in jobs(engine, _exp_id(engine, "T")).values()} == {"cancelled"}


@pytest.mark.postgres
def test_a_cancel_from_the_app_pauses_a_distributed_run_and_its_queued_repetitions(pg: tuple[str, Engine]) -> None:
    """The app's Cancel (status cancelled) reaches `pxp run --distributed` through its Hold, not as a SIGINT."""
    url, engine = pg
    waiter = _distributed_waiter(url, "X")
    try:
        _wait_until(lambda: waiter.poll() is not None or (
            _has_jobs(engine) and {st for _, st in jobs(engine, _exp_id(engine, "X")).values()} == {"todo"}))
        with engine.begin() as conn:
            conn.execute(text("update experiment set status = 'cancelled' where name = 'X'"))
        _, err = waiter.communicate(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()] == [
        f"cancelled from another worker: every repetition is paused; resume with: pxp --db {url} run --resume X "
        "--distributed"]
    eid = _exp_id(engine, "X")
    assert {st for _, st in jobs(engine, eid).values()} == {"cancelled"}
    with engine.connect() as conn:
        runs = {s for (s,) in conn.execute(text("select status from run where experiment_id = :e"), {"e": eid})}
        exp = conn.execute(text("select status, worker from experiment where id = :e"), {"e": eid}).one()
    assert runs == {"paused"} and tuple(exp) == ("cancelled", None)


def _has_jobs(engine: Engine) -> bool:
    with engine.connect() as conn:
        if conn.execute(text("select to_regclass('procrastinate_jobs')")).scalar() is None:
            return False
        return bool(conn.execute(text("select count(*) from experiment where name = 'X'")).scalar())
