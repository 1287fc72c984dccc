"""`pxp report`: Table 1 through pxp.analysis.tables (the page's code path) in every format,
several experiments side by side, a clear line for an unknown experiment (docs/research.md, Analytics)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from pxp.analysis.report import FORMATS, render, render_many, report_json
from pxp.data.importers.transcripts import import_transcripts
from pxp.protocols.pxp.intelligibility import METRIC_LABELS, METRICS, SessionTags, table1
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session, experiment_session_tags
from pxp.storage.tables import Experiment
from tests.analysis.test_analytics import VECTORS, write_vectors
from tests.factories import fit_content, make_rad


def cli(db_url: str, *args: str) -> tuple[int, str]:
    from pxp.cli.main import app

    res = CliRunner().invoke(app, ["--db", db_url, *args])
    return res.exit_code, res.output


def reference(engine: Engine, exp: Experiment) -> dict[str, object]:
    """The lead's original path: every message into Python, then pxp.protocols.pxp.intelligibility.table1."""
    with db_session(engine) as db:
        runs, sessions, tags = experiment_session_tags(db, experiment_id=exp.id or 0)
    per_run = {}
    for run in runs:
        rows = [SessionTags(tuple(tags.get(s.id or 0, ())), aborted=s.status == "aborted")
                for s in sessions.get(run.id or 0, []) if s.status != "open"]
        if rows:
            per_run[run.id] = rows
    return table1(per_run, exp.n).as_json(exp.name)


@pytest.fixture
def two(any_engine: Engine, tmp_path: Path) -> Engine:
    make_rad(any_engine)
    cfg = RunConfig(dataset="toy-rad", reps=3, seed=4, shuffle=True, simulated={"accuracy": 0.5, "adopt": 0.6})
    exp = create_experiment(any_engine, cfg, name="RAD")
    run_experiment(any_engine, exp.id or 0)
    import_transcripts(any_engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="DRUG", n=10, k=3)
    return any_engine


def test_report_json_equals_the_reference_path(two: Engine) -> None:
    for name in ("RAD", "DRUG"):
        rep = report_json(two, name)
        rep.pop("performance", None)
        with db_session(two) as db:
            from pxp.storage.store import find_experiment

            exp = find_experiment(db, name_or_id=name)
        assert exp is not None
        assert rep == reference(two, exp)
    rep = report_json(two, "RAD")
    assert set(rep) >= {"experiment", "repetitions", "total_sessions", "aborted_sessions", "metrics", "by_message",
                        "by_message_min", "by_message_max"}
    assert set(rep["metrics"]["two_way"]) == {"count", "proportion", "min", "max"}
    assert rep["repetitions"] == 3 and rep["total_sessions"] == 10
    assert all(len(v) == 10 for v in rep["by_message"].values())


def test_formats_and_side_by_side(two: Engine) -> None:
    url = two.url.render_as_string(hide_password=False)
    code, out = cli(url, "report", "--experiment", "DRUG", "--format", "markdown")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "| Count | DRUG |"  # one repetition: no min–max column
    assert "| Total sessions | 3 |" in lines
    assert "| 1-way intelligible sessions for Human | 2 (0.67) |" in lines
    assert "| Ultra-Strong intelligible sessions for Machine | 1 (0.33) |" in lines
    assert "| Aborted sessions (apart) | 0 |" in lines

    code, out = cli(url, "report", "--experiment", "RAD", "--experiment", "DRUG", "--format", "csv")
    assert code == 0, out
    rows = list(csv.DictReader(io.StringIO(out)))  # tidy: one row per experiment and property
    assert [(r["experiment"], r["property"]) for r in rows] == [(e, m) for e in ("RAD", "DRUG") for m in METRICS]
    reps = {"RAD": report_json(two, "RAD"), "DRUG": report_json(two, "DRUG")}
    for r in rows:
        m = reps[r["experiment"]]["metrics"][r["property"]]
        assert r["label"] == METRIC_LABELS[r["property"]]
        assert [float(r[c]) for c in ("count (sessions)", "proportion (of total)", "min (sessions)",
                                      "max (sessions)")] == [m["count"], m["proportion"], m["min"], m["max"]]
        assert float(r["total (sessions)"]) == reps[r["experiment"]]["total_sessions"]

    code, out = cli(url, "report", "--experiment", "RAD", "--format", "table")
    assert code == 0 and out.splitlines()[0].split() == ["Count", "RAD", "min–max"]
    code, out = cli(url, "report", "--experiment", "RAD", "--format", "json")
    assert code == 0 and json.loads(out)["experiment"] == "RAD"
    code, out = cli(url, "report", "--experiment", "RAD", "--experiment", "DRUG", "--format", "json")
    assert code == 0 and [r["experiment"] for r in json.loads(out)] == ["RAD", "DRUG"]


def test_bad_input_is_one_clear_line(two: Engine) -> None:
    url = two.url.render_as_string(hide_password=False)
    code, out = cli(url, "report", "--experiment", "nope")
    assert code != 0 and "no experiment named 'nope'" in out and "Traceback" not in out
    code, out = cli(url, "report", "--experiment", "RAD", "--format", "xml")
    assert code != 0 and "unknown format" in out and "Traceback" not in out


def test_render_escapes_markdown_cells() -> None:
    rep = table1({}, 10).as_json("a|b\nc")
    md = render(rep, "markdown")
    assert "| Count | a\\|b c |" in md.splitlines()[0]
    for fmt in FORMATS:
        assert render_many([rep, rep], fmt)
    with pytest.raises(ValueError, match="unknown format"):
        render_many([rep], "xml")


def test_by_annotator_h1_vs_h2(engine: Engine, tmp_path: Path) -> None:
    """The paper's DRUG-h1 / DRUG-h2 columns: `pxp report --by annotator`."""
    lines = []
    for inst, pair in {"a": ("v1", "v1"), "b": ("v2", "v4"), "c": ("v4", "v2")}.items():
        for ann, vec in zip(("h1", "h2"), pair, strict=True):
            preds = fit_content(VECTORS[vec], ("CCO", "CC(=O)O", "c1ccccc1O", "CCN"))
            for j, ((sender, tag), pred) in enumerate(zip(VECTORS[vec], preds, strict=True), start=1):
                lines.append(json.dumps({"session": f"{inst}-{ann}", "instance": inst, "j": j, "sender": sender,
                                         "tag": tag, "annotator": ann, "prediction": pred,
                                         "explanation": f"{ann} on {inst}"}))
    (tmp_path / "live.jsonl").write_text("\n".join(lines) + "\n")
    import_transcripts(engine, tmp_path / "live.jsonl", name="DRUG", n=10, k=3, task="drug")
    url = engine.url.render_as_string(hide_password=False)
    code, out = cli(url, "report", "--experiment", "DRUG", "--by", "annotator", "--format", "markdown")
    assert code == 0, out
    assert out.splitlines()[0] == "| Count | h1 | h2 |"
    assert "| 2-way intelligible sessions | 2 (0.67) | 2 (0.67) |" in out
    assert "| Strong intelligible sessions for Human | 1 (0.33) | 1 (0.33) |" in out
    code, out = cli(url, "report", "--experiment", "DRUG", "--by", "mood")
    assert code != 0 and "unknown grouping 'mood'" in out and "Traceback" not in out
    code, out = cli(url, "report", "--experiment", "nope", "--by", "annotator")
    assert code != 0 and "no experiment named 'nope'" in out
