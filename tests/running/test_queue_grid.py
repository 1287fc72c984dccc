"""`pxp run --grid grid.toml --distributed`: a study's experiments over `pxp worker`s (docs/operations.md, Workers).

Real PostgreSQL, real procrastinate, real `pxp` and `pxp worker` subprocesses.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from pxp.running.workers.queue import NOT_STARTED, jobs_of
from tests.factories import make_text
from tests.llm_server import FakeLLM, Reply
from tests.running.test_queue import ENV, PXP, ROOT, _stop, _tables, _wait_until, _worker, pg  # noqa: F401

GRID = """
name = "{name}"
[grid]
machine = [{{ label = "weak", machine = "simulated", simulated = {{ accuracy = 0.2, adopt = 0.3 }} }},
           {{ label = "strong", machine = "simulated", simulated = {{ accuracy = 0.9, adopt = 0.9 }} }}]
dataset = ["toy-rad"]
seed = [3]
[run]
n = 6
k = 3
reps = 2
shuffle = true
"""
WARNING = "no pxp worker is running; start one with `pxp worker`"


def _grid(tmp_path: Path, name: str, body: str = GRID) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(body.format(name=name))
    return path


def _names(study: str) -> list[str]:
    return [f"{study}/weak/toy-rad/s3", f"{study}/strong/toy-rad/s3"]


def _ids(engine: Engine, study: str) -> list[int]:
    with engine.connect() as conn:
        return [int(i) for (i,) in conn.execute(
            text("select id from experiment where name like :p order by id"), {"p": f"{study}/%"})]


def _queued(engine: Engine, study: str) -> int:
    """The study's jobs (0 until both experiments exist: the queue's tables are installed before)."""
    ids = _ids(engine, study)
    return sum(len(j) for j in jobs_of(engine, ids).values()) if len(ids) == 2 else 0


def _stop_study(url: str, tmp_path: Path, engine: Engine, study: str,
                stop: Callable[[subprocess.Popen[str]], None]) -> tuple[subprocess.Popen[str], list[str]]:
    """Run the 2-experiment grid `study` --distributed with no worker, `stop` it once its 4 jobs are
    queued, and wait for it to exit; the waiter and its stderr lines."""
    waiter, lines = _waiter(url, "--grid", str(_grid(tmp_path, study)), "--distributed", "--no-progress")
    try:
        _wait_until(lambda: _queued(engine, study) == 4 or waiter.poll() is not None)
        assert waiter.poll() is None, "".join(lines)
        stop(waiter)
        waiter.wait(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    _all_lines(waiter)
    return waiter, lines


def _as(study_json: dict[str, Any], study: str, like: str) -> str:
    """The study's JSON with its name replaced (the experiments' names carry it)."""
    return json.dumps(study_json, sort_keys=True).replace(f'"{study}', f'"{like}')


def _waiter(url: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`pxp --db url run ...` in the background; its stderr lines as they come."""
    proc = subprocess.Popen([*PXP, "--db", url, "run", *args], env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    _READERS[proc.pid] = reader
    return proc, lines


_READERS: dict[int, threading.Thread] = {}  # each waiter's stderr reader, by pid


def _all_lines(proc: subprocess.Popen[str]) -> None:
    """Wait (generously) for the exited waiter's stderr reader to reach the end of its output."""
    _READERS.pop(proc.pid).join(timeout=60)


@pytest.mark.long
@pytest.mark.postgres
def test_a_distributed_grid_queues_every_experiment_and_equals_the_in_process_grid(
    pg: tuple[str, Engine], tmp_path: Path,  # noqa: F811
) -> None:
    url, engine = pg
    ref = subprocess.run([*PXP, "--db", url, "run", "--grid", str(_grid(tmp_path, "ref")), "--format", "json",
                          "--no-progress"], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr

    waiter, lines = _waiter(url, "--grid", str(_grid(tmp_path, "dist")), "--distributed", "--format", "json",
                            "--no-progress")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        # every repetition of every experiment is queued at once, before any worker runs
        _wait_until(lambda: _queued(engine, "dist") == 4 or waiter.poll() is not None)
        assert {st for j in jobs_of(engine, _ids(engine, "dist")).values() for _, st in j.values()} == {"todo"}
        _wait_until(lambda: any(WARNING in ln for ln in lines) or waiter.poll() is not None)
        assert waiter.poll() is None, "".join(lines)
        # each experiment's claim is held while the study waits: an in-process runner is refused
        res = subprocess.run([*PXP, "--db", url, "run", "--resume", _names("dist")[1], "--no-progress"],
                             env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 1 and "already running" in res.stderr, res.stderr
        workers = [_worker(url, "g1"), _worker(url, "g2")]
        out, _ = waiter.communicate(timeout=300)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        _stop(workers)
    _all_lines(waiter)
    assert waiter.returncode == 0, "".join(lines)
    assert sum(WARNING in ln for ln in lines) == 1, "".join(lines)
    assert "Traceback" not in "".join(lines)
    with engine.connect() as conn:
        statuses = [s for (s,) in conn.execute(text("select status from experiment where name like 'dist/%'"))]
    assert statuses == ["finished", "finished"]
    assert {st for j in jobs_of(engine, _ids(engine, "dist")).values() for _, st in j.values()} == {"succeeded"}
    for a, b in zip(_names("ref"), _names("dist"), strict=True):  # Table 1 and the series, session by session
        assert _tables(engine, a) == _tables(engine, b)
    assert _as(json.loads(out), "dist", "ref") == _as(json.loads(ref.stdout), "ref", "ref")  # the study report


@pytest.mark.long
@pytest.mark.postgres
def test_ctrl_c_pauses_every_repetition_of_the_study(pg: tuple[str, Engine], tmp_path: Path) -> None:  # noqa: F811
    url, engine = pg
    waiter, lines = _stop_study(url, tmp_path, engine, "cc", lambda w: w.send_signal(signal.SIGINT))
    assert waiter.returncode == 130, "".join(lines)
    said = [ln for ln in lines if ln.strip() and not ln.startswith("study cc:")]
    assert len(said) == 1 and said[0].startswith("interrupted: the study's unfinished repetitions are paused"), said
    assert {st for j in jobs_of(engine, _ids(engine, "cc")).values() for _, st in j.values()} == {"cancelled"}
    with engine.connect() as conn:
        runs = {s for (s,) in conn.execute(text(
            "select r.status from run r join experiment e on e.id = r.experiment_id where e.name like 'cc/%'"))}
        exps = {s for (s,) in conn.execute(text("select status from experiment where name like 'cc/%'"))}
        claims = conn.execute(text("select count(*) from experiment where name like 'cc/%' and worker is not null"))
    assert runs == {"paused"} and exps == {"paused"}  # no worker started a repetition; each reads paused
    assert claims.scalar_one() == 0  # every claim released
    assert _notes(engine, "cc") == {NOT_STARTED}

    # each resumes: one over a worker, one in-process; both finish
    first, second = _names("cc")
    worker = _worker(url, "r1")
    try:
        res = subprocess.run([*PXP, "--db", url, "run", "--resume", first, "--distributed", "--no-progress"],
                             env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        _stop([worker])
    assert res.returncode == 0, res.stderr
    res = subprocess.run([*PXP, "--db", url, "run", "--resume", second, "--no-progress"],
                         env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    with engine.connect() as conn:
        st = {s for (s,) in conn.execute(text(
            "select r.status from run r join experiment e on e.id = r.experiment_id where e.name like 'cc/%' "
            "union select status from experiment where name like 'cc/%'"))}
    assert st == {"finished"}


def _notes(engine: Engine, study: str) -> set[str | None]:
    with engine.connect() as conn:
        return {n for (n,) in conn.execute(text(
            "select r.note from run r join experiment e on e.id = r.experiment_id where e.name like :p"),
            {"p": f"{study}/%"})}


@pytest.mark.postgres
def test_cancelling_two_experiments_of_the_study_at_once_pauses_it_and_is_not_a_second_ctrl_c(
    pg: tuple[str, Engine], tmp_path: Path,  # noqa: F811
) -> None:
    """The app's Cancel (the experiment's status set to cancelled) of two experiments in the same
    moment: the study pauses as on one Ctrl-C and waits until every job has ended; it does not
    stop waiting as a second Ctrl-C would (which left the jobs queued)."""
    url, engine = pg
    def cancel_both(_: subprocess.Popen[str]) -> None:  # what the app's Cancel does to each, both at once
        with engine.begin() as conn:
            conn.execute(text("update experiment set status = 'cancelled' where name like 'cx/%'"))

    waiter, lines = _stop_study(url, tmp_path, engine, "cx", cancel_both)
    assert waiter.returncode == 130, "".join(lines)
    said = [ln for ln in lines if ln.strip() and not ln.startswith("study cx:")]
    assert len(said) == 1 and said[0].startswith("cancelled from another worker: the study's unfinished "
                                                 "repetitions are paused"), said
    assert {st for j in jobs_of(engine, _ids(engine, "cx")).values() for _, st in j.values()} == {"cancelled"}
    assert _notes(engine, "cx") == {NOT_STARTED}
    with engine.connect() as conn:
        runs = {s for (s,) in conn.execute(text(
            "select r.status from run r join experiment e on e.id = r.experiment_id where e.name like 'cx/%'"))}
        exps = {s for (s,) in conn.execute(text("select status from experiment where name like 'cx/%'"))}
        claims = conn.execute(text("select count(*) from experiment where name like 'cx/%' and worker is not null"))
    assert runs == {"paused"} and exps == {"cancelled"}  # the cancel stands; each resumable
    assert claims.scalar_one() == 0


DOWN = """
name = "{name}"
[grid]
machine = [{{ label = "sim", machine = "simulated" }},
           {{ label = "down", machine = "openai:gpt-test", base_url = "BASE" }}]
dataset = ["toy-text"]
seed = [0]
[run]
n = 4
reps = 1
"""


@pytest.mark.postgres
def test_a_paused_experiment_of_a_distributed_grid_exits_2_naming_it(pg: tuple[str, Engine], tmp_path: Path) -> None:  # noqa: F811
    url, engine = pg
    make_text(engine)
    env = {**ENV, "OPENAI_API_KEY": "sk-test", "PXP_LLM_MAX_RETRIES": "0"}
    with FakeLLM(lambda req: Reply(status=529, error="overloaded")) as server:
        grid = _grid(tmp_path, "pd", DOWN.replace("BASE", server.openai_url))
        worker = subprocess.Popen([*PXP, "--db", url, "worker", "--name", "pw"], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            res = subprocess.run([*PXP, "--db", url, "run", "--grid", str(grid), "--distributed", "--no-progress",
                                  "--yes"],
                                 env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        finally:
            _stop([worker])
    assert res.returncode == 2, res.stderr
    assert "Study pd: 2 experiment(s)" in res.stdout  # the study report is still printed
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(("paused:", "resume"))]
    assert len(lines) == 2, res.stderr  # one line for the study, one with the real command
    assert lines[0].startswith("paused: study pd: pd/down/toy-text/s0 repetition 1: ") and "overloaded" in lines[0]
    assert lines[1] == f"resume with: pxp --db {url} run --resume pd/down/toy-text/s0 --distributed"
    assert "NAME" not in res.stderr
    assert "pd/sim/toy-text/s0 repetition" not in res.stderr and "Traceback" not in res.stderr
    with engine.connect() as conn:
        st = dict(conn.execute(text("select name, status from experiment where name like 'pd/%'")).all())
    assert st == {"pd/sim/toy-text/s0": "finished", "pd/down/toy-text/s0": "paused"}
