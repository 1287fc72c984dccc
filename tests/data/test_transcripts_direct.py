"""Transcripts stored as they are read (docs/development.md "Imports at dataset scale"): a file whose sessions each
have their lines together never touches the stage; one whose lines are not together is rolled back and read again
through the stage. Either way the stored study, the problems and their words are those of the staged import."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, text
from sqlmodel import Session as DB

from pxp.data.importers import transcript_store
from pxp.data.importers.common import KEPT_PROBLEMS, ImportProblems
from pxp.data.importers.transcripts import _check_line, _plain_row, _Sessions, _staged, import_transcripts
from pxp.storage.store import count_rows, table_of
from pxp.storage.tables import Annotator, Context, Dataset, Experiment, Instance, Message, Run, Session
from tests.factories import ABORTED, STUDY_SHAPES, write_study

ROOT = Path(__file__).resolve().parents[2]


def _stage_used(engine: Engine, run: Any) -> tuple[Any, bool]:
    """`run()`'s result (or its ImportProblems), and whether any statement it sent named the stage."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        try:
            out = run()
        except ImportProblems as err:
            out = err
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return out, any(transcript_store.STAGE.name in s for s in seen)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _interleaved(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every session's first message, then every second one, ...: each session's lines apart, sessions in the
    same order of first appearance."""
    return sorted(recs, key=lambda r: int(r["j"]))  # sorted() is stable


def _counts(engine: Engine) -> tuple[int, ...]:
    with DB(engine) as db:
        return tuple(count_rows(db, t) for t in (Dataset, Experiment, Run, Annotator, Instance, Session, Message,
                                                 Context))


def _study(engine: Engine, name: str) -> list[tuple[Any, ...]]:
    """Experiment `name` as stored, without its ids: each session (by repetition and ordinal) with its instance's
    key, its annotator's name, and its messages and contexts."""
    s, r, e, i, a, m, c = (table_of(t) for t in (Session, Run, Experiment, Instance, Annotator, Message, Context))
    with engine.connect() as conn:
        sessions = conn.execute(
            select(s.c.id, r.c.repetition, s.c.ordinal, s.c.status, s.c.stop_reason, s.c.n, s.c.k, s.c.learn_note,
                   s.c.context_kept, i.c.key, i.c.ordinal, a.c.name)
            .join(r, r.c.id == s.c.run_id).join(e, e.c.id == r.c.experiment_id)
            .outerjoin(i, i.c.id == s.c.instance_id).outerjoin(a, a.c.id == s.c.annotator_id)
            .where(e.c.name == name).order_by(r.c.repetition, s.c.ordinal)).all()
        out = []
        for sid, *row in sessions:
            msgs = conn.execute(select(m.c.j, m.c.sender, m.c.receiver, m.c.tag, m.c.prediction, m.c.explanation,
                                       m.c.match, m.c.agree, m.c.changed).where(m.c.session_id == sid)
                                .order_by(m.c.j)).all()
            ctx = conn.execute(select(c.c.j, c.c.content).where(c.c.session_id == sid).order_by(c.c.j)).all()
            out.append((*row, *map(tuple, msgs), *map(tuple, ctx)))
    return out


def test_lines_together_are_stored_without_the_stage_as_the_stage_stores_them(any_engine: Engine,
                                                                              tmp_path: Path) -> None:
    sessions = 2 * transcript_store.sessions_per_batch(any_engine.dialect.name) + 300  # three batches
    path = write_study(tmp_path / "s.jsonl", sessions, shapes=(ABORTED, *STUDY_SHAPES))
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="A", n=10, k=3))
    assert not staged and (got.sessions, got.nonconformant) == (sessions, [])
    # the same file through the stage, as a second experiment on the same instances and annotators
    got, staged = _stage_used(any_engine, lambda: _staged(any_engine, path, "B", _Sessions(10, 3, "text", False)))
    assert staged and got.sessions == sessions
    study = _study(any_engine, "A")
    assert len(study) == sessions and study == _study(any_engine, "B")
    assert _counts(any_engine)[:5] == (2, 2, 4, 7, 1_000)  # a dataset an experiment; the annotators once


def test_instance_ids_kept_between_batches_and_forgotten_store_what_the_stage_stores(
        any_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch asks the database only for the instances no earlier batch named; the ids kept are forgotten when
    they are INSTANCE_IDS_KEPT: small batches and a small memory here, so both happen many times."""
    monkeypatch.setattr(transcript_store, "SESSIONS", 40)
    monkeypatch.setattr(transcript_store, "SESSIONS_PG", 40)
    monkeypatch.setattr(transcript_store, "INSTANCE_IDS_KEPT", 45)
    path = write_study(tmp_path / "s.jsonl", 600, instances=70)
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="A", n=10, k=3))
    assert not staged and got.sessions == 600
    got, staged = _stage_used(any_engine, lambda: _staged(any_engine, path, "B", _Sessions(10, 3, "text", False)))
    assert staged and got.sessions == 600
    study = _study(any_engine, "A")
    assert len({row[8] for row in study}) == 70 and study == _study(any_engine, "B")
    assert _counts(any_engine)[4] == 2 * 70  # each experiment's dataset makes each instance once


def test_a_batch_of_sessions_that_ended_before_their_first_message_is_stored(any_engine: Engine,
                                                                             tmp_path: Path) -> None:
    """Sessions with no message at all: a batch of them stores its sessions and no message."""
    path = _write(tmp_path / "aborted.jsonl", [{"session": f"s{i}", "instance": f"x{i}", "status": "aborted"}
                                               for i in range(3)])
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="A", n=10, k=3))
    assert not staged and (got.sessions, got.messages) == (3, 0)
    assert _counts(any_engine)[5:7] == (3, 0)


def test_interleaved_lines_go_through_the_stage_and_store_what_lines_together_store(any_engine: Engine,
                                                                                  tmp_path: Path) -> None:
    together = write_study(tmp_path / "t.jsonl", 1_200)
    apart = _write(tmp_path / "a.jsonl", _interleaved(_lines(together)))
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, apart, name="A", n=10, k=3))
    assert staged and (got.sessions, got.messages) == (1_200, len(_lines(together)))
    assert _counts(any_engine)[:3] == (1, 1, 2)  # the first attempt left nothing behind
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, together, name="B", n=10, k=3))
    assert not staged
    study = _study(any_engine, "A")
    assert len(study) == 1_200 and study == _study(any_engine, "B")


def test_a_session_met_again_after_many_is_found_from_the_table_of_those_seen(
        any_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the last SEEN_KEPT sessions are held in memory: a session met again after more than that is found
    when the file ends, and the import then goes through the stage."""
    monkeypatch.setattr(transcript_store, "SEEN_KEPT", 50)
    recs = _lines(write_study(tmp_path / "t.jsonl", 700))
    recs.append(dict(recs[0], j=4, tag="RATIFY"))  # session 0 again, 699 sessions later: message 4 after its end
    path = _write(tmp_path / "late.jsonl", recs)
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="L", n=10, k=3))
    assert staged and isinstance(got, ImportProblems)
    with pytest.raises(ImportProblems) as staged_err:
        _staged(any_engine, path, "L", _Sessions(10, 3, "text", False))
    assert got.problems == staged_err.value.problems
    assert _counts(any_engine) == (0,) * 8
    good = write_study(tmp_path / "g.jsonl", 700)  # and a file that never meets a session again: no stage
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, good, name="G", n=10, k=3))
    assert not staged and got.sessions == 700


def _bad_file(path: Path, sessions: int, *, interleave: bool = False, seed: int = 3) -> Path:
    """Sessions with a mix of a line's problems and a session's: a wrong type, a message given twice, two
    instances, a status, a file's own fact contradicted, a session that does not conform."""
    rng = random.Random(seed)
    recs = _lines(write_study(path, sessions))
    for r in rng.sample(recs, max(3, len(recs) // 40)):
        kind = rng.randrange(5)
        if kind == 0:
            r["j"] = str(r["j"])
        elif kind == 1:
            r["instance"] = r["instance"] + "-other"
        elif kind == 2:
            r["status"] = "halted"
        elif kind == 3:
            r["match"] = r["tag"] != "RATIFY" if r["j"] > 1 else None
        else:
            r["explanation"] = "bad\u0000"
    recs.insert(2, dict(recs[1]))  # a message given twice
    return _write(path, _interleaved(recs) if interleave else recs)


@pytest.mark.parametrize("interleave", [False, True])
def test_problems_are_the_stages_word_for_word(any_engine: Engine, tmp_path: Path, interleave: bool) -> None:
    path = _bad_file(tmp_path / "bad.jsonl", 900, interleave=interleave)
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="P", n=10, k=3))
    assert staged == interleave and isinstance(got, ImportProblems)
    with pytest.raises(ImportProblems) as err:
        _staged(any_engine, path, "P", _Sessions(10, 3, "text", False))
    assert got.problems == err.value.problems and got.problems.more == err.value.problems.more
    assert _counts(any_engine) == (0,) * 8


def test_more_problems_than_are_kept_are_the_stages_and_counted_alike(engine: Engine, tmp_path: Path) -> None:
    """Past KEPT_PROBLEMS the stage keeps the lines' problems first, then the sessions': kept apart here too."""
    recs = _lines(write_study(tmp_path / "t.jsonl", 2_000))
    for i, r in enumerate(recs):
        if i % 3 == 0:
            r["instance"] = r["instance"] + "-b"  # a session's problem (two instances) when not its first line
        if i % 4 == 0:
            r["explanation"] = 5  # a line's problem
    path = _write(tmp_path / "many.jsonl", recs)
    with pytest.raises(ImportProblems) as direct:
        import_transcripts(engine, path, name="M", n=10, k=3)
    with pytest.raises(ImportProblems) as staged:
        _staged(engine, path, "M", _Sessions(10, 3, "text", False))
    assert len(direct.value.problems) == KEPT_PROBLEMS and direct.value.problems.more > 500
    assert (direct.value.problems, direct.value.problems.more) == (staged.value.problems, staged.value.problems.more)


def test_nonconformant_sessions_allowed_are_stored_and_listed_as_the_stage_does(engine: Engine,
                                                                              tmp_path: Path) -> None:
    recs = _lines(write_study(tmp_path / "t.jsonl", 600))
    recs = [r for i, r in enumerate(recs) if i % 11]  # some sessions lose a message
    path = _write(tmp_path / "nc.jsonl", recs)
    with pytest.raises(ImportProblems) as refused:
        import_transcripts(engine, path, name="N", n=10, k=3)
    with pytest.raises(ImportProblems) as refused_staged:
        _staged(engine, path, "N", _Sessions(10, 3, "text", False))
    assert refused.value.problems == refused_staged.value.problems
    got = import_transcripts(engine, path, name="N", n=10, k=3, allow_nonconformant=True)
    again = _staged(engine, path, "N2", _Sessions(10, 3, "text", True))
    assert got.nonconformant == again.nonconformant and len(got.nonconformant) > 50
    assert (got.sessions, got.messages) == (again.sessions, again.messages)


def test_a_problem_after_stored_batches_leaves_the_database_as_it_was(any_engine: Engine, tmp_path: Path) -> None:
    """Batches of sessions are written before the bad line is read: all are rolled back."""
    import_transcripts(any_engine, write_study(tmp_path / "first.jsonl", 30), name="first", n=10, k=3)
    before = _counts(any_engine)
    batch = transcript_store.sessions_per_batch(any_engine.dialect.name)
    recs = _lines(write_study(tmp_path / "t.jsonl", 4 * batch, instances=1_500, annotators=9))
    recs[len(recs) * 3 // 4]["sender"] = "robot"  # after three batches
    path = _write(tmp_path / "late-bad.jsonl", recs)
    with pytest.raises(ImportProblems) as err:
        import_transcripts(any_engine, path, name="late", n=10, k=3)
    assert "unknown sender 'robot'" in err.value.problems[0]
    assert _counts(any_engine) == before
    # and a session met again after stored batches: rolled back, then stored once through the stage
    sessions = 3 * batch + 100
    recs = _lines(write_study(tmp_path / "u.jsonl", sessions))
    moved = [r for r in recs if r["session"] == "s3" and r["j"] == 3]
    path = _write(tmp_path / "moved.jsonl", [r for r in recs if r not in moved] + moved)
    got, staged = _stage_used(any_engine, lambda: import_transcripts(any_engine, path, name="moved", n=10, k=3))
    assert staged and got.sessions == sessions
    assert _counts(any_engine)[1] == before[1] + 1 and _counts(any_engine)[5] == before[5] + sessions


def test_the_quick_line_check_is_the_field_by_field_one(tmp_path: Path) -> None:
    """`_plain_row` passes a line only with the row the full check gives it; any doubt is left to that check."""
    base = {"session": "s1", "instance": "x1", "j": 2, "sender": "human", "tag": "REFUTE",
            "prediction": "Pneumonia", "explanation": "the lower lobe"}
    odd: list[dict[str, Any]] = [
        {}, {"j": True}, {"j": 0}, {"j": 2.0}, {"repetition": None}, {"repetition": 2}, {"session": 7},
        {"session": " "}, {"session": "s\u200b1"}, {"instance": "ｘ1"}, {"sender": "Human"}, {"sender": "h"},
        {"tag": "refute"}, {"tag": "WAIT"}, {"prediction": None}, {"prediction": "x" * 70_000},
        {"prediction": "  Pneumonia"}, {"explanation": ""}, {"explanation": "a\u0007b"}, {"explanation": "café"},
        {"explanation": 3}, {"match": 1}, {"agree": False}, {"changed": None}, {"status": "aborted"},
        {"status": None}, {"annotator": "ann 1"}, {"annotator": 12}, {"annotator": ""}, {"receiver": "machine"},
        {"receiver": "m"}, {"receiver": "human"}, {"created_at": "2026"}, {"colour": "red"}]
    for task in ("text", "rad"):
        for change in odd:
            rec = {**base, **change}
            problems: list[tuple[int, str]] = []
            full = _check_line(1, rec, "f:1", task, problems)
            quick = _plain_row(1, rec, task)
            assert quick is None or (quick == full and problems == []), (task, change)
            if not problems and full is not None and task == "text" and change in ({}, {"agree": False}):
                assert quick == full  # the usual line takes the quick path


def _pg_busy_copying(url: str) -> bool:
    import psycopg

    with psycopg.connect(url.replace("+psycopg", "")) as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'COPY%message%' "
                         "AND datname = current_database()").fetchone() != (0,)


def test_kill_9_while_batches_are_stored_leaves_the_database_as_it_was(any_engine: Engine, tmp_path: Path) -> None:
    """The CLI killed (SIGKILL) once it has written sessions in its transaction: nothing of the file is kept."""
    url = any_engine.url.render_as_string(hide_password=False)
    path = write_study(tmp_path / "big.jsonl", 40_000)
    before = _counts(any_engine)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "pxp.cli.main", "--db", url, "import", "transcripts", str(path),
                             "--name", "killed", "--n", "10", "--k", "3"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wal = Path(str(any_engine.url.database) + "-wal")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until sessions are being written
        if (wal.exists() and wal.stat().st_size > 2_000_000) if any_engine.dialect.name == "sqlite" \
                else _pg_busy_copying(url):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed mid-import, not after it
    any_engine.dispose()
    if any_engine.dialect.name == "postgresql":
        with any_engine.connect() as c:  # the server notices the dropped connection and rolls back
            for _ in range(200):
                if not c.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                      "AND pid <> pg_backend_pid()")).scalar():
                    break
                c.rollback()  # a transaction reads pg_stat_activity once: the next look needs a new one
                time.sleep(0.05)
    assert _counts(any_engine) == before
    with any_engine.connect() as c:
        assert c.execute(select(table_of(Experiment).c.name)).scalars().all() == []


_PEAKS = """
import json, sys, tracemalloc
from pathlib import Path
from pxp.data.importers import transcript_store
from pxp.data.importers.transcripts import import_transcripts
from pxp.storage.store import make_engine
from tests.factories import write_study
folder, engine, peaks = Path(sys.argv[1]), make_engine(sys.argv[2]), []
import_transcripts(engine, write_study(folder / "warm.jsonl", 1_000), name="warm", n=10, k=3)
for sessions in (6_000, 30_000):
    path = write_study(folder / f"{sessions}.jsonl", sessions)
    tracemalloc.start()
    import_transcripts(engine, path, name=f"s{sessions}", n=10, k=3)
    peaks.append(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
print(json.dumps({"peaks": peaks, "kept": transcript_store.SEEN_KEPT}))
"""


@pytest.mark.long
def test_memory_stays_flat_as_a_file_stored_as_read_grows(engine: Engine, tmp_path: Path) -> None:
    """Sessions are held a batch at a time, the hashes of the sessions met at most SEEN_KEPT at a time (both files
    have more): five times the sessions, the same peak. Measured in a process of its own, whose memories (the
    text rule's, the engine's) nothing else has warmed, and which warms nothing for the tests after this one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PEAKS, str(tmp_path), engine.url.render_as_string()],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    (small, large), kept = got["peaks"], got["kept"]
    assert kept < 6_000
    assert large < small * 1.25 + 256 * 1024, (small, large)
