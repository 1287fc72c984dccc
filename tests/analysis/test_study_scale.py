"""Reading a study of any size (docs/development.md, "Reading a study"): past PostgreSQL's 65,535
parameters every reading command still answers, and `pxp validate`, `pxp export` and `pxp report`
hold no more memory for a study three times as large."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from pxp.analysis import queries
from pxp.analysis.agreement import agreement_report
from pxp.analysis.common_ground import probe_sessions
from pxp.analysis.export import export_experiment
from pxp.analysis.queries import Selection
from pxp.analysis.report import report_json
from pxp.analysis.tables import session_frame, table1, tag_transitions
from pxp.analysis.validate import validate
from pxp.app.data import sessions_count, sessions_table
from pxp.cli.main import app
from pxp.data.importers.transcripts import import_transcripts
from pxp.storage.batches import BATCH
from pxp.storage.store import db_session, find_experiment
from tests.factories import ABORTED, STUDY_SHAPES, write_study

SESSIONS = 70_000  # past PostgreSQL's 65,535 bound parameters in one statement


def pxp(engine: Engine, *args: str) -> str:
    res = CliRunner().invoke(app, ["--db", engine.url.render_as_string(hide_password=False), *args])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.long
@pytest.mark.postgres
def test_every_reading_command_answers_on_70000_sessions_on_postgresql(pg_engine: Engine, tmp_path: Path) -> None:
    """70,000 sessions imported through the fast path (COPY); the commands and the pages' queries of the whole
    study, one experiment of it, and a filter on it (the study is the smallest that passes the bound)."""
    shapes = (*[ABORTED] * 4, *STUDY_SHAPES)  # 2.3 messages a session: the study is cheap to build
    path = write_study(tmp_path / "study.jsonl", SESSIONS, reps=2, shapes=shapes)
    assert import_transcripts(pg_engine, path, name="S", n=10, k=3, task="rad").sessions == SESSIONS
    assert "70000 session(s) conform" in pxp(pg_engine, "validate", "--experiment", "S")
    assert "70000 session(s) conform" in pxp(pg_engine, "validate")
    rep = json.loads(pxp(pg_engine, "report", "--experiment", "S", "--format", "json"))
    assert rep["total_sessions"] == SESSIONS / 2  # the median of the two repetitions
    assert "a0" in pxp(pg_engine, "report", "--experiment", "S", "--by", "annotator")
    pxp(pg_engine, "report", "--experiment", "S", "--agreement")
    out = tmp_path / "out"
    pxp(pg_engine, "export", "--experiment", "S", "--out", str(out))
    messages = sum(len(shapes[i % len(shapes)]) for i in range(SESSIONS))
    with (out / "messages.jsonl").open() as f:
        assert sum(1 for _ in f) == messages
    with db_session(pg_engine) as db:
        exp = find_experiment(db, name_or_id="S")
    assert exp is not None
    sel = Selection(experiments=(exp.id or 0,))
    assert table1(pg_engine, sel, n=10).as_json("S")["total_sessions"] == SESSIONS / 2
    assert len(session_frame(pg_engine, sel)) == SESSIONS
    assert not tag_transitions(pg_engine, sel).empty
    assert queries.options(pg_engine).experiments[0]["ended"] == SESSIONS
    assert agreement_report(pg_engine, sel)["agreement"] is not None
    assert probe_sessions(pg_engine, [exp.id or 0]) == []
    assert sessions_count(pg_engine, experiment="S", tag="REJECT") == SESSIONS // len(shapes)
    assert len(sessions_table(pg_engine, experiment="S", tag="REVISE", limit=50)) == 50


def _peak(fn: Callable[[], object]) -> int:
    queries.clear_cache()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_validate_export_and_report_hold_no_more_for_a_study_three_times_larger(engine: Engine,
                                                                                tmp_path: Path) -> None:
    """The same commands on one and on three pages of pxp.storage.batches (1,000 and 3,000 sessions): Python's
    peak allocation stays within a tenth and 100 kB (a whole study read at once would triple it)."""
    peaks: dict[str, list[int]] = {"validate": [], "export": [], "report": []}
    for name, size in (("small", BATCH), ("large", 3 * BATCH)):
        path = write_study(tmp_path / f"{name}.jsonl", size, reps=1)
        import_transcripts(engine, path, name=name, n=10, k=3, task="rad")
        with db_session(engine) as db:
            exp = find_experiment(db, name_or_id=name)
        assert exp is not None
        report_json(engine, name)  # once before measuring: the modules' first-use allocations are not the study's
        eid, out = exp.id, tmp_path / name
        peaks["validate"].append(_peak(partial(validate, engine, experiment_id=eid)))
        peaks["export"].append(_peak(partial(export_experiment, engine, name, out, "csv")))
        peaks["report"].append(_peak(partial(report_json, engine, name)))
    for what, (small, large) in peaks.items():  # objects of 2,000 more sessions would be megabytes
        assert large < 1.1 * small + 100_000, f"{what}: {small} B at {BATCH} sessions, {large} B at {3 * BATCH}"
