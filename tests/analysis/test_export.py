"""`pxp export`: D, M, C, evaluations, calls and probes in jsonl, csv and parquet; JSONL round-trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import func, select
from typer.testing import CliRunner

from pxp.analysis.export import TABLES, export_experiment
from pxp.analysis.report import report_json
from pxp.cli.main import app
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.transcripts import import_transcripts
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import find_experiment, get_engine
from pxp.storage.tables import Context, Evaluation, Experiment, LLMCall, Message, Probe, Run, Session
from tests.factories import make_rad
from tests.running.test_runner import HARSH, m_table


@pytest.fixture
def done(engine: Engine) -> Experiment:
    make_rad(engine, per_label=4)
    cfg = RunConfig(dataset="toy-rad", split="train", reps=2, seed=2, learn=True, eval_at_start=True,
                    simulated=dict(HARSH))
    exp = create_experiment(engine, cfg, name="X")
    assert run_experiment(engine, exp.id or 0).status == "finished"
    return exp


def _count(engine: Engine, model: Any) -> int:
    with DB(engine) as db:
        return int(db.exec(select(func.count()).select_from(model)).one())


def test_jsonl_layout_and_round_trip_through_import_transcripts(engine: Engine, done: Experiment,
                                                                tmp_path: Path) -> None:
    res = export_experiment(engine, "X", tmp_path / "out", "jsonl")
    assert res.rows == {
        "sessions": _count(engine, Session), "messages": _count(engine, Message), "contexts": _count(engine, Context),
        "evaluations": _count(engine, Evaluation), "calls": _count(engine, LLMCall), "probes": 0,
    }
    assert (tmp_path / "out" / "probes.jsonl").read_text() == ""  # unprobed: the file, with no rows
    meta = json.loads((tmp_path / "out" / "experiment.json").read_text())
    assert meta["name"] == "X" and meta["config"]["learn"] is True and meta["n"] == 10
    assert set(meta["files"]) == set(TABLES)
    assert [r["repetition"] for r in meta["runs"]] == [1, 2]
    assert meta["runs"][0]["instance_order"][:2] == ["atelectasis_2", "pneumonia_1"]  # keys, in order
    lines = [json.loads(x) for x in (tmp_path / "out" / "messages.jsonl").read_text().splitlines()]
    assert len(lines) == res.rows["messages"]
    assert {"session", "instance", "j", "sender", "tag", "prediction", "explanation", "repetition"} <= set(lines[0])
    sessions = [json.loads(x) for x in (tmp_path / "out" / "sessions.jsonl").read_text().splitlines()]
    assert all(s["context_kept"] in (True, False) for s in sessions)
    assert any(s["learn_val_after"] is not None for s in sessions)
    contexts = [json.loads(x) for x in (tmp_path / "out" / "contexts.jsonl").read_text().splitlines()]
    assert isinstance(contexts[0]["content"], dict)

    imported = import_transcripts(engine, tmp_path / "out" / "messages.jsonl", name="back", n=10, k=3, task="rad")
    assert imported.sessions == len(sessions) and imported.messages == len(lines)
    a, b = report_json(engine, "X"), report_json(engine, "back")
    for r in (a, b):
        r.pop("experiment")
        r.pop("performance", None)
    assert a == b
    with DB(engine) as db:
        x, back = find_experiment(db, name_or_id="X"), find_experiment(db, name_or_id="back")
    assert x is not None and back is not None
    assert m_table(engine, x) == m_table(engine, back)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_hold_the_same_rows(engine: Engine, done: Experiment, tmp_path: Path, fmt: str) -> None:
    res = export_experiment(engine, "X", tmp_path / fmt, fmt)
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    for name in TABLES:
        df = read(tmp_path / fmt / f"{name}.{fmt}")
        assert len(df) == res.rows[name], name
    m = read(tmp_path / fmt / f"messages.{fmt}")
    with DB(engine) as db:
        rows = db.exec(select(Message).order_by(Message.session_id, Message.j)).all()
    assert list(m["tag"]) == [r.tag for r in rows]
    assert list(m["prediction"]) == [r.prediction for r in rows]
    c = read(tmp_path / fmt / f"contexts.{fmt}")
    assert isinstance(json.loads(c["content"].iloc[0]), dict)
    e = read(tmp_path / fmt / f"evaluations.{fmt}")
    assert set(e["split"]) == {"val", "test"}


def test_calls_carry_the_agents_call_fields_with_the_providers_text_redacted(engine: Engine, done: Experiment,
                                                                             tmp_path: Path) -> None:
    """An export names the call-cost fields itself (it loads no table class: docs/development.md, "Start-up"): they
    are pxp.agents.base.CALL_FIELDS in their order, and a provider's error text is redacted as call_fields does."""
    from pxp.agents.base import CALL_FIELDS, call_fields
    from pxp.analysis import export

    assert export.CALL_FIELDS == CALL_FIELDS
    with DB(engine) as db:
        call = db.exec(select(LLMCall).order_by(LLMCall.id)).first()
        assert call is not None
        call.error, call.tokens_in = "HTTP 401: bad key sk-abcdefghijklmnop", None
        db.add(call)
        db.commit()
        db.refresh(call)
        expected = call_fields(call)
    export_experiment(engine, "X", tmp_path / "out", "jsonl")
    first = json.loads((tmp_path / "out" / "calls.jsonl").read_text().splitlines()[0])
    assert list(first)[3:] == list(CALL_FIELDS)
    assert {k: first[k] for k in CALL_FIELDS} == expected
    assert first["error"] == "HTTP 401: bad key [redacted]" and first["tokens_in"] is None


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_probed_run_exports_its_probes(engine: Engine, tmp_path: Path, fmt: str) -> None:
    """`--probe` (docs/research.md, Common-ground probe): probes.EXT holds every stored probe row, with its repetition
    and session;
    an unprobed experiment in the same database exports a probes file with the columns and no rows."""
    make_rad(engine, per_label=4)

    def cfg(probe: bool) -> RunConfig:
        return RunConfig(dataset="toy-rad", split="train", reps=2, seed=2, learn=False, probe=probe,
                         simulated={"accuracy": 0.6, "adopt": 0.7})

    probed, plain = create_experiment(engine, cfg(True), name="P"), create_experiment(engine, cfg(False), name="U")
    for exp in (probed, plain):
        assert run_experiment(engine, exp.id or 0).status == "finished"
    with DB(engine) as db:
        stored = db.exec(select(Probe).join(Session).join(Run).where(Run.experiment_id == probed.id)).all()
        assert db.exec(select(func.count()).select_from(Probe)).one() == len(stored) > 0  # U has none
    res = export_experiment(engine, "P", tmp_path / "p", fmt)
    meta = json.loads((tmp_path / "p" / "experiment.json").read_text())
    assert meta["files"]["probes"] == f"probes.{fmt}"
    assert meta["columns"]["probes"] == ["repetition", "session", "j", "question", "truth", "answer", "valid",
                                         "created_at"]
    path = tmp_path / "p" / f"probes.{fmt}"
    if fmt == "jsonl":
        rows = pd.DataFrame([json.loads(x) for x in path.read_text().splitlines()])
    else:
        rows = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    assert res.rows["probes"] == len(rows) == len(stored)
    got = sorted((int(r.session), int(r.j), str(r.question), bool(r.truth), str(r.answer), bool(r.valid))
                 for r in rows.itertuples())
    assert got == sorted((p.session_id, p.j, p.question, p.truth, str(p.answer), p.valid) for p in stored)
    assert set(rows["repetition"]) == {1, 2}
    calls = pd.read_csv(tmp_path / "p" / "calls.csv") if fmt == "csv" else None
    assert calls is None or (calls["purpose"] == "probe").sum() == len(stored)  # one accounted call per probe
    res = export_experiment(engine, "U", tmp_path / "u", fmt)
    assert res.rows["probes"] == 0 and (tmp_path / "u" / f"probes.{fmt}").exists()
    if fmt != "jsonl":
        empty = pd.read_csv(tmp_path / "u" / "probes.csv") if fmt == "csv" else pd.read_parquet(
            tmp_path / "u" / f"probes.{fmt}")
        assert len(empty) == 0 and list(empty.columns) == meta["columns"]["probes"]


def test_export_command_and_its_errors(db_url: str, tmp_path: Path) -> None:
    engine = get_engine(db_url)
    make_rad(engine)
    cli = CliRunner()
    res = cli.invoke(app, ["--db", db_url, "run", "--dataset", "toy-rad", "--name", "E", "--no-progress"])
    assert res.exit_code == 0, res.output
    out = str(tmp_path / "o")
    res = cli.invoke(app, ["--db", db_url, "export", "--experiment", "E", "--format", "csv", "--out", out])
    assert res.exit_code == 0 and "exported 'E'" in res.output
    assert (tmp_path / "o" / "sessions.csv").exists() and (tmp_path / "o" / "experiment.json").exists()
    res = cli.invoke(app, ["--db", db_url, "export", "--experiment", "nope", "--out", str(tmp_path / "p")])
    assert res.exit_code == 1 and "no experiment named 'nope'" in res.output and "Traceback" not in res.output
    res = cli.invoke(app, ["--db", db_url, "export", "--experiment", "E", "--format", "xml", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "unknown format 'xml'" in res.output
    (tmp_path / "file").write_text("x")
    res = cli.invoke(app, ["--db", db_url, "export", "--experiment", "E", "--out", str(tmp_path / "file")])
    assert res.exit_code == 1 and "not a directory" in res.output


def test_aborted_sessions_round_trip(engine: Engine, tmp_path: Path) -> None:
    """A session aborted mid-way (as on a format failure) keeps its status through export and import."""
    from pxp.running.pxp.controlled.runner import default_agents
    from pxp.running.pxp.engine import abort, step

    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=2, learn=True), name="Y")
    with DB(engine) as db:
        first = db.exec(select(Session).order_by(Session.id)).first()
        assert first is not None
        from pxp.storage.tables import Run

        run = db.get(Run, first.run_id)
        assert run is not None
    agents = default_agents(engine, exp, run)
    step(engine, first.id or 0, agents)
    step(engine, first.id or 0, agents)
    abort(engine, first.id or 0, "the answer could not be parsed after 5 attempts")
    assert run_experiment(engine, exp.id or 0).status == "finished"
    export_experiment(engine, "Y", tmp_path / "y", "jsonl")
    import_transcripts(engine, tmp_path / "y" / "messages.jsonl", name="Y2", n=10, k=3, task="rad")
    a, b = report_json(engine, "Y"), report_json(engine, "Y2")
    assert a["aborted_sessions"] == 0.5  # median over the two repetitions
    for r in (a, b):
        r.pop("experiment")
        r.pop("performance", None)
    assert a == b
    with DB(engine) as db:
        statuses = sorted(s.status for s in db.exec(select(Session).join(Run).join(Experiment)
                                                    .where(Experiment.name == "Y2")))
    assert statuses.count("aborted") == 1


def test_open_sessions_are_refused_on_import(engine: Engine, tmp_path: Path) -> None:
    from pxp.data.importers.common import ImportProblems
    from pxp.running.pxp.controlled.runner import default_agents
    from pxp.running.pxp.engine import step
    from pxp.storage.tables import Run

    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train"), name="Z")
    with DB(engine) as db:
        first = db.exec(select(Session).order_by(Session.id)).first()
        assert first is not None
        run = db.get(Run, first.run_id)
        assert run is not None
    step(engine, first.id or 0, default_agents(engine, exp, run))
    export_experiment(engine, "Z", tmp_path / "z", "jsonl")
    with pytest.raises(ImportProblems, match="status must be finished or aborted"):
        import_transcripts(engine, tmp_path / "z" / "messages.jsonl", name="Z2", n=10, k=3, task="rad")


def test_text_with_unicode_line_separators_round_trips(engine: Engine, tmp_path: Path) -> None:
    """JSON leaves U+2028 and U+2029 unescaped (ensure_ascii=False); a JSONL reader that splits on them
    breaks an LLM's or an expert's explanation in two. (NEL, VT, FS are control characters, which the text
    rule refuses at every entrance: the import names them, docs/development.md "The text rule".)"""
    from pxp.running.pxp.controlled.runner import default_agents
    from pxp.running.pxp.engine import step
    from pxp.storage.store import session_msgs
    from pxp.storage.tables import Run

    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=1), name="U")
    with DB(engine) as db:
        first = db.exec(select(Session).order_by(Session.id)).first()
        assert first is not None
        run = db.get(Run, first.run_id)
        assert run is not None
        odd = "line one\u2028line two\u2029para\nnext\ttab end"
    step(engine, first.id or 0, default_agents(engine, exp, run))
    with DB(engine) as db:
        m = db.exec(select(Message).where(Message.session_id == first.id)).one()
        m.explanation = odd
        db.add(m)
        db.commit()
    assert run_experiment(engine, exp.id or 0).status == "finished"
    export_experiment(engine, "U", tmp_path / "u", "jsonl")
    res = import_transcripts(engine, tmp_path / "u" / "messages.jsonl", name="U2", n=10, k=3, task="rad")
    with DB(engine) as db:
        u2 = find_experiment(db, name_or_id="U2")
        assert u2 is not None
        s2 = db.exec(select(Session).join(Run).where(Run.experiment_id == u2.id).order_by(Session.ordinal)).first()
        assert s2 is not None
        assert session_msgs(db, session_id=s2.id or 0)[0].explanation == odd
    assert res is not None
    messages = (tmp_path / "u" / "messages.jsonl").read_text(encoding="utf-8")
    (tmp_path / "u" / "nel.jsonl").write_text(messages.replace("\\t", "\u0085", 1), encoding="utf-8")
    with pytest.raises(ImportProblems) as err:
        import_transcripts(engine, tmp_path / "u" / "nel.jsonl", name="U3", n=10, k=3, task="rad")
    assert "explanation: contains the control character U+0085" in str(err.value)
    assert res.messages == _count(engine, Message) // 2


def test_a_session_aborted_before_its_first_message_round_trips(engine: Engine, tmp_path: Path) -> None:
    """No parseable INIT: the session has no message, yet export + import still count it apart."""
    from pxp.running.pxp.engine import abort
    from pxp.storage.tables import Run

    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=1), name="Z")
    with DB(engine) as db:
        first = db.exec(select(Session).order_by(Session.id)).first()
        assert first is not None
    abort(engine, first.id or 0, "no parseable answer after 5 attempts")
    assert run_experiment(engine, exp.id or 0).status == "finished"
    out = export_experiment(engine, "Z", tmp_path / "z", "jsonl")
    assert out is not None
    lines = [json.loads(x) for x in (tmp_path / "z" / "messages.jsonl").read_text().splitlines()]
    marker = [r for r in lines if r["j"] is None]
    assert len(marker) == 1 and marker[0]["status"] == "aborted" and marker[0]["session"] == first.id
    assert lines[0] is marker[0] or lines.index(marker[0]) == 0  # ordered by session ordinal
    import_transcripts(engine, tmp_path / "z" / "messages.jsonl", name="Z2", n=10, k=3, task="rad")
    a, b = report_json(engine, "Z"), report_json(engine, "Z2")
    assert a["aborted_sessions"] == b["aborted_sessions"] == 1
    for r in (a, b):
        r.pop("experiment")
        r.pop("performance", None)
    assert a == b
    with DB(engine) as db:
        z2 = db.exec(select(Session).join(Run).join(Experiment).where(Experiment.name == "Z2")).all()
    assert sum(s.status == "aborted" for s in z2) == 1
