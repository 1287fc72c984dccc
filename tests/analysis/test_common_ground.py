"""Common-ground probe results next to Table 1: the analysis function, `pxp report` and `pxp run --probe`
(docs/research.md, Common-ground probe)."""

from __future__ import annotations

import json

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.analysis.common_ground import probe_frame, probe_sessions, probe_summary
from pxp.analysis.report import render, report_json
from pxp.protocols.pxp.common_ground import ProbeResult, score
from pxp.protocols.pxp.intelligibility import one_way
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.tables import Experiment, Message, Probe, Session
from tests.analysis.test_report import cli
from tests.factories import make_rad


def _probed(engine: Engine, name: str = "probed", **kw: object) -> Experiment:
    cfg = RunConfig(dataset="toy-rad", split="train", reps=2, seed=5, simulated={"accuracy": 0.4, "adopt": 0.5},
                    probe=True, **kw)  # type: ignore[arg-type]
    exp = create_experiment(engine, cfg, name=name)
    assert run_experiment(engine, exp.id or 0).status == "finished"
    return exp


def test_probe_sessions_score_each_session_from_its_stored_probes(engine: Engine) -> None:
    make_rad(engine, per_label=4)
    exp = _probed(engine)
    rows = probe_sessions(engine, [exp.id or 0])
    assert len(rows) == 12  # 6 train instances × 2 repetitions, every session has a human message
    with DB(engine) as db:
        for r in rows:
            ps = db.exec(select(Probe).where(Probe.session_id == r["session_id"])).all()
            sc = score(ProbeResult(p.j, p.question, p.truth, p.answer, p.valid) for p in ps)
            assert (r["probes"], r["accuracy"], r["kappa"]) == (len(ps), sc.accuracy, sc.kappa)
            tags = [Tag(m.tag) for m in db.exec(select(Message).where(Message.session_id == r["session_id"],
                                                                      Message.sender == Sender.HUMAN.value)
                                                .order_by(col(Message.j)))]
            s = db.get(Session, r["session_id"])
            assert s is not None
            assert r["one_way_human"] is (one_way(tags) and s.status != "aborted")
    df = probe_frame(engine, [exp.id or 0])
    assert list(df["session_id"]) == [r["session_id"] for r in rows]
    summary = probe_summary(rows)
    assert summary["sessions"] == 12 and summary["probes"] == sum(r["probes"] for r in rows)
    assert probe_sessions(engine, []) == []


def test_report_shows_probes_only_when_the_experiment_has_them(engine: Engine, db_url: str) -> None:
    make_rad(engine, per_label=4)
    exp = _probed(engine)
    plain = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", seed=5), name="plain")
    assert run_experiment(engine, plain.id or 0).status == "finished"
    assert "probes" not in report_json(engine, "plain")
    assert "common-ground probe" not in render(report_json(engine, "plain"), "table")
    rep = report_json(engine, exp.name)
    assert rep["probes"]["summary"]["sessions"] == 12
    text = render(rep, "table")
    assert "probed: common-ground probe" in text and "1-way h" in text
    md = render(rep, "markdown")
    assert "| rep | session | probes | accuracy | κ | 1-way h | 1-way m |" in md
    code, out = cli(db_url, "report", "--experiment", exp.name)
    assert code == 0 and "common-ground probe" in out and "median κ" in out
    code, out = cli(db_url, "report", "--experiment", exp.name, "--format", "json")
    assert code == 0 and json.loads(out)["probes"]["summary"]["sessions"] == 12


def test_pxp_run_probe_stores_probes(engine: Engine, db_url: str) -> None:
    make_rad(engine, per_label=4)
    code, out = cli(db_url, "run", "--dataset", "toy-rad", "--split", "train", "--name", "cli-probe", "--probe",
                    "--sim-probe-accuracy", "1", "--no-progress")
    assert code == 0, out
    assert "cli-probe: common-ground probe" in out  # the run's report carries the probe section
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "cli-probe")).one()
        assert exp.config["probe"] is True and exp.config["simulated"]["probe_accuracy"] == 1.0
    rows = probe_sessions(engine, [exp.id or 0])
    assert rows and all(r["accuracy"] == 1.0 for r in rows)
