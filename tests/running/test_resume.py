"""Resume from the database alone: after a crash at any point, after a SIGKILL,
and after a transient API failure that paused the run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.analysis.validate import validate
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import make_engine, upgrade
from pxp.storage.tables import Context, Evaluation, LLMCall, Message, Run, Session
from tests.factories import make_rad, make_text
from tests.llm_server import FakeLLM, Reply, answer
from tests.running.test_runner import _cfg as runner_cfg
from tests.running.test_runner import d_table, e_table, m_table

ROOT = Path(__file__).resolve().parents[2]
PXP = [sys.executable, "-c", "from pxp.cli.main import main; main()"]  # the console script's entry point


def _cfg(**kw: Any) -> RunConfig:
    """test_runner's configuration with two repetitions (what the subprocess runs pass as flags)."""
    return runner_cfg(**{"reps": 2, **kw})


# Seconds per simulated call in the subprocess runs: long enough (a run takes a few seconds)
# that a loaded CI machine's poller sees the kill point before the run ends.
SUBPROCESS_LATENCY = "0.1"


def _tables(engine: Engine, name: str) -> tuple[Any, ...]:
    with DB(engine) as db:
        from pxp.storage.store import find_experiment

        exp = find_experiment(db, name_or_id=name)
    assert exp is not None
    return m_table(engine, exp), d_table(engine, exp), e_table(engine, exp)


@pytest.fixture
def reference(tmp_path: Path) -> tuple[str, tuple[Any, ...]]:
    """An uninterrupted run, and its tables."""
    url = f"sqlite:///{tmp_path / 'ref.db'}"
    e = make_engine(url)
    upgrade(e)
    make_rad(e, per_label=4)
    exp = create_experiment(e, _cfg(), name="X")
    assert run_experiment(e, exp.id or 0).status == "finished"
    tables = _tables(e, "X")
    e.dispose()
    return str(tmp_path / "ref.db"), tables


def _copy(src: str, dst: Path) -> Engine:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return make_engine(f"sqlite:///{dst}")


def _cut(engine: Engine, rep: int, ordinal: int, keep: int, stage: str) -> set[tuple[int, Any]]:
    """Turn a finished run back into the state a crash leaves: repetition `rep` stopped in
    session `ordinal` after `keep` messages ("messages"), after its LEARN decision but before
    its test evaluation ("decided"). Returns the surviving messages' (id, created_at)."""
    with DB(engine) as db:
        run = db.exec(select(Run).where(Run.repetition == rep)).one()
        sessions = db.exec(select(Session).where(Session.run_id == run.id)).all()
        for s in sessions:
            if s.ordinal < ordinal:
                continue
            msgs = db.exec(select(Message).where(Message.session_id == s.id)).all()
            total = len(msgs)
            n_keep = 0 if s.ordinal > ordinal else (total if stage == "decided" else min(keep, total))
            db.exec(delete(Message).where(col(Message.session_id) == s.id, col(Message.j) > n_keep))  # type: ignore[call-overload]
            db.exec(delete(Context).where(col(Context.session_id) == s.id, col(Context.j) > n_keep))  # type: ignore[call-overload]
            if s.ordinal == ordinal and stage == "decided":
                continue
            finished = s.ordinal == ordinal and n_keep == total
            db.exec(update(Session).where(col(Session.id) == s.id).values(  # type: ignore[call-overload]
                status="finished" if finished else "open", stop_reason=s.stop_reason if finished else None,
                context_kept=None, learn_note=None, learn_val_before=None, learn_val_after=None))
        # val@0 is stored with the first LEARN decision, val@o with session o's decision,
        # test@o after it; test@0 (--eval-at-start) before any session
        val_from = (0 if ordinal == 1 else ordinal) if stage == "messages" else ordinal + 1
        db.exec(delete(Evaluation).where(  # type: ignore[call-overload]
            col(Evaluation.run_id) == run.id, col(Evaluation.split) == "val",
            col(Evaluation.after_session) >= val_from))
        db.exec(delete(Evaluation).where(  # type: ignore[call-overload]
            col(Evaluation.run_id) == run.id, col(Evaluation.split) == "test",
            col(Evaluation.after_session) >= max(ordinal, 1)))
        db.exec(update(Run).where(col(Run.id) == run.id).values(status="running"))  # type: ignore[call-overload]
        db.commit()
        return {(m.id or 0, m.created_at) for m in db.exec(select(Message))}


def _cut_points(ref_tables: tuple[Any, ...]) -> list[tuple[int, int, str]]:
    m = ref_tables[0]
    points = []
    for ordinal in range(1, 7):
        total = sum(1 for r in m if r[0] == 1 and r[1] == ordinal)
        for keep in sorted({0, 1, total - 1, total}):
            points.append((ordinal, keep, "messages"))
        points.append((ordinal, total, "decided"))
    return points


def test_resume_after_a_crash_at_every_point_of_a_repetition(tmp_path: Path, reference: tuple[str, Any]) -> None:
    """Every commit boundary of repetition 1 (each message, each LEARN decision, each evaluation)."""
    src, ref = reference
    for i, (ordinal, keep, stage) in enumerate(_cut_points(ref)):
        e = _copy(src, tmp_path / f"cut{i}.db")
        before = _cut(e, 1, ordinal, keep, stage)
        if not (ordinal == 6 and stage == "decided"):
            assert _tables(e, "X") != ref, "the cut changed something"
        out = run_experiment(e, _exp(e).id or 0)
        assert out.status == "finished"
        assert _tables(e, "X") == ref, (ordinal, keep, stage)
        with DB(e) as db:
            after = {(m.id or 0, m.created_at) for m in db.exec(select(Message))}
        assert before <= after, "messages stored before the crash are untouched (no session restarted)"
        e.dispose()


def test_resume_with_both_repetitions_cut_and_a_missing_first_validation_score(
    tmp_path: Path, reference: tuple[str, Any]
) -> None:
    src, ref = reference
    e = _copy(src, tmp_path / "both.db")
    _cut(e, 1, 1, 2, "messages")
    _cut(e, 2, 4, 10, "messages")  # session 4 of rep 2 finished, its LEARN decision missing
    with DB(e) as db:  # and a crash before repetition 1's --eval-at-start score was stored
        run1 = db.exec(select(Run).where(Run.repetition == 1)).one()
        db.exec(delete(Evaluation).where(col(Evaluation.run_id) == run1.id))  # type: ignore[call-overload]
        db.commit()
    assert run_experiment(e, _exp(e).id or 0, concurrency=1).status == "finished"
    assert _tables(e, "X") == ref


def _exp(engine: Engine) -> Any:
    from pxp.storage.tables import Experiment

    with DB(engine) as db:
        return db.exec(select(Experiment).where(Experiment.name == "X")).one()


# --- a real kill -9 -------------------------------------------------------------------------------


def _count(db_path: Path, sql: str) -> int:
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0


_POLLS = {
    "messages": "select count(*) from message",
    "decisions": "select count(*) from session where context_kept is not null",
    "evaluations": "select count(*) from evaluation",
}


@pytest.mark.parametrize(("what", "at_least"), [
    ("messages", 1), ("evaluations", 2), ("decisions", 3), ("messages", 30), ("evaluations", 14),
])
def test_sigkill_at_several_points_then_resume(
    tmp_path: Path, reference: tuple[str, Any], what: str, at_least: int
) -> None:
    db = tmp_path / "killed.db"
    url = f"sqlite:///{db}"
    e = make_engine(url)
    upgrade(e)
    make_rad(e, per_label=4)
    e.dispose()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [*PXP, "--db", url, "run", "--dataset", "toy-rad", "--split", "train",
            "--reps", "2", "--seed", "2", "--learn", "--eval-at-start", "--sim-accuracy", "0.4", "--sim-adopt", "0.2",
            "--sim-mislead", "0.3", "--sim-latency", SUBPROCESS_LATENCY, "--name", "X", "--no-progress"]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _count(db, _POLLS[what]) < at_least and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run was killed before it finished"
    killed = _count(db, "select count(*) from message")
    if (what, at_least) == ("messages", 1):
        _named_as_interrupted(url, env, tmp_path)
    res = subprocess.run(
        [*PXP, "--db", url, "run", "--resume", "X", "--no-progress"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "Total sessions" in res.stdout
    if (what, at_least) == ("messages", 1):
        assert res.stderr.startswith("note: X was interrupted (last seen "), res.stderr
        _named_as_interrupted(url, env, tmp_path, expected=False)
    e = make_engine(url)
    assert _tables(e, "X") == reference[1], f"killed after {killed} messages"
    assert validate(e)[1] == []
    e.dispose()


def _named_as_interrupted(url: str, env: dict[str, str], cwd: Path, *, expected: bool = True) -> None:
    """No silent death (docs/operations.md, Troubleshooting): `pxp doctor` names a run killed outright, with the
    command that resumes it, until it is resumed."""
    doctor = subprocess.run([*PXP, "doctor", "--db", url], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=120)
    runs = [ln for ln in doctor.stdout.splitlines() if ln.startswith("✗ run: ")]
    if not expected:
        assert runs == [], doctor.stdout
        return
    assert doctor.returncode == 1 and len(runs) == 1, doctor.stdout
    assert runs[0].startswith("✗ run: X was interrupted (last seen ")
    assert runs[0].endswith("its process ended without finishing or pausing; resume it with `pxp run --resume X`")


# --- transient API failures pause; resume retries ---------------------------------------------


def test_api_failure_pauses_the_run_and_resume_retries(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    make_text(engine)  # 3 train, 3 val, 3 test, no images
    broken = threading.Event()
    served = {"n": 0}

    def model(req: Any) -> Reply:  # a machine that always gives the same answer
        return answer("Pneumonia", "patchy airspace consolidation in the left lower zone with air bronchograms")

    def handler(req: Any) -> Reply:
        served["n"] += 1
        if broken.is_set() or served["n"] == 25:
            broken.set()
            return Reply(status=503, error="overloaded")
        return model(req)

    with FakeLLM(handler) as server:
        cfg = RunConfig(dataset="toy-text", split="train", machine="openai:gpt-test", base_url=server.openai_url,
                        reps=2, learn=True, extra={"max_retries": 0})
        exp = create_experiment(engine, cfg, name="api")
        out = run_experiment(engine, exp.id or 0)
        assert out.status == "paused"
        assert set(out.paused) == {1, 2} and all("overloaded" in (n or "") for n in out.paused.values())
        with DB(engine) as db:
            runs = db.exec(select(Run).where(Run.experiment_id == exp.id)).all()
            assert {r.status for r in runs} == {"paused"}
            assert not db.exec(select(Session).where(Session.status == "aborted")).all()
            errors = db.exec(select(LLMCall).where(col(LLMCall.error).is_not(None))).all()
            assert errors, "the failed calls are accounted"
            stored = {(m.id, m.created_at) for m in db.exec(select(Message))}
        broken.clear()
        served["n"] = 1000
        out = run_experiment(engine, exp.id or 0)
    assert out.status == "finished"
    with DB(engine) as db:
        after = {(m.id, m.created_at) for m in db.exec(select(Message))}
        sessions = db.exec(select(Session)).all()
        assert {r.status for r in db.exec(select(Run))} == {"finished"}
        assert all(r.note is None for r in db.exec(select(Run)))
        purposes = set(db.exec(select(LLMCall.purpose).where(LLMCall.provider == "openai")).all())
        assert {"ask", "eval"} <= purposes  # LEARN's and the test split's evaluations asked the LLM too
    assert stored <= after
    assert all(s.status == "finished" and s.context_kept is not None for s in sessions)
    assert validate(engine)[1] == []


# --- Ctrl-C pauses every repetition after its current step --------------------------------------


class _StopAfter:
    """An observer that asks the run to stop after `n` messages (what Ctrl-C does)."""

    def __init__(self, stop: threading.Event, n: int) -> None:
        self.stop, self.n, self.seen = stop, n, 0
        self.ended: list[tuple[int, str, str | None]] = []

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
        pass

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        self.seen += 1
        if self.seen >= self.n:
            self.stop.set()

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        pass

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        self.ended.append((rep, status, note))


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_stop_request_pauses_and_resume_finishes_identically(
    request: pytest.FixtureRequest, backend: str, reference: tuple[str, Any]
) -> None:
    e: Engine = request.getfixturevalue("engine" if backend == "sqlite" else "pg_engine")
    make_rad(e, per_label=4)
    exp = create_experiment(e, _cfg(), name="X")
    stop = threading.Event()
    obs = _StopAfter(stop, 12)
    out = run_experiment(e, exp.id or 0, observer=obs, stop=stop)
    assert out.status == "paused" and set(out.paused) == {1, 2}
    assert all(st == "paused" and note == "interrupted by the user" for _, st, note in obs.ended)
    assert run_experiment(e, exp.id or 0).status == "finished"
    assert _tables(e, "X") == reference[1]


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_sigint_exits_130_and_the_run_resumes(tmp_path: Path, reference: tuple[str, Any], inherited: str) -> None:
    """Ctrl-C (or the app's Cancel, a SIGINT the run sends itself) pauses the run, also when it was started
    with SIGINT ignored (in the background by a shell without job control)."""
    db = tmp_path / "int.db"
    url = f"sqlite:///{db}"
    e = make_engine(url)
    upgrade(e)
    make_rad(e, per_label=4)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [*PXP, "--db", url, "run", "--dataset", "toy-rad", "--split", "train", "--reps", "2", "--seed", "2",
            "--eval-at-start", "--sim-accuracy", "0.4", "--sim-adopt", "0.2", "--sim-mislead", "0.3",
            "--sim-latency", SUBPROCESS_LATENCY, "--name", "X"]
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherited == "ignored" else None
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:  # its progress, line by line: interrupted once a session is done (five to go)
        lines.append(line)
        if "session 1 finished" in line:
            break
    proc.send_signal(signal.SIGINT)
    stderr = "".join(lines) + proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run --resume X" in stderr and "Traceback" not in stderr
    with DB(e) as s:
        assert {r.status for r in s.exec(select(Run))} == {"paused"}
    res = subprocess.run([*PXP, "--db", url, "run", "--resume", "X", "--no-progress"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert _tables(e, "X") == reference[1]


@pytest.mark.postgres
def test_sigkill_on_postgresql_then_resume(pg_url: str, tmp_path: Path, reference: tuple[str, Any]) -> None:
    e = make_engine(pg_url)
    upgrade(e)
    make_rad(e, per_label=4)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [*PXP, "--db", pg_url, "run", "--dataset", "toy-rad", "--split", "train", "--reps", "2", "--seed", "2",
            "--learn", "--eval-at-start", "--sim-accuracy", "0.4", "--sim-adopt", "0.2", "--sim-mislead", "0.3",
            "--sim-latency", SUBPROCESS_LATENCY, "--name", "X", "--no-progress"]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        with DB(e) as s:
            if len(s.exec(select(Message.id)).all()) >= 20:
                break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run was killed before it finished"
    _named_as_interrupted(pg_url, env, tmp_path)
    res = subprocess.run([*PXP, "--db", pg_url, "run", "--resume", "X", "--no-progress"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "note: X was interrupted" in res.stderr
    _named_as_interrupted(pg_url, env, tmp_path, expected=False)
    assert _tables(e, "X") == reference[1]
    assert validate(e)[1] == []
    e.dispose()
