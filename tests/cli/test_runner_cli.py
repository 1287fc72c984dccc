"""`pxp run`: new runs, --like, --resume, progress lines, summary, paused exit code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment, Run
from tests.factories import make_drug, make_rad, make_text
from tests.llm_server import FakeLLM, Reply, answer

cli = CliRunner()

RUN = ["run", "--dataset", "toy-rad", "--reps", "3", "--seed", "2", "--sim-accuracy", "0.4", "--sim-adopt", "0.2",
       "--sim-mislead", "0.3", "--eval-at-start"]


def pxp(db_url: str, *args: str) -> Any:
    return cli.invoke(app, ["--db", db_url, *args], catch_exceptions=False)


def _json(res: Any) -> dict[str, Any]:
    rep: dict[str, Any] = json.loads(res.stdout)
    rep.pop("experiment")
    return rep


@pytest.fixture
def url(db_url: str) -> str:
    make_rad(get_engine(db_url), per_label=4)
    return db_url


def test_run_prints_table1_performance_and_cost_summary(url: str) -> None:
    res = pxp(url, *RUN, "--name", "A")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Total sessions" in out and "2-way intelligible sessions" in out and "min–max" in out
    assert "Machine performance on the test split" in out
    assert "Calls (cost and latency)" in out and "wall time" in out
    # not a terminal: plain progress lines on stderr, one per session and repetition
    assert "rep 1: session 1 finished" in res.stderr and "rep 3: finished" in res.stderr
    with DB(get_engine(url)) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "A")).one()
    assert exp.status == "finished" and exp.config["learn"] is True and exp.config["split"] == "train"
    assert exp.config["concurrency"] == 8


def test_json_report_has_the_performance_series_and_stdout_stays_json(url: str) -> None:
    res = pxp(url, *RUN, "--name", "J", "--format", "json", "--no-progress")
    assert res.exit_code == 0, res.output
    rep = _json(res)
    assert rep["total_sessions"] == 6 and rep["repetitions"] == 3
    perf = rep["performance"]["test"]
    assert perf["after_session"][0] == 0
    assert set(perf["median"]) == {"prediction", "explanation", "both"}
    assert set(perf["runs"]) == {"1", "2", "3"}


def test_like_repeats_an_experiment_and_options_override(url: str) -> None:
    a = _json(pxp(url, *RUN, "--name", "A", "--format", "json", "--no-progress"))
    res = pxp(url, "run", "--like", "A", "--name", "B", "--format", "json", "--no-progress")
    assert res.exit_code == 0, res.output
    assert _json(res) == a
    res = pxp(url, "run", "--like", "A", "--seed", "3", "--name", "C", "--format", "json", "--no-progress")
    assert _json(res) != a
    with DB(get_engine(url)) as db:
        configs = {e.name: e.config for e in db.exec(select(Experiment))}
    assert configs["C"]["seed"] == 3 and configs["C"]["simulated"] == configs["A"]["simulated"]
    strip = ("pxp_version",)
    assert {k: v for k, v in configs["B"].items() if k not in strip} == {
        k: v for k, v in configs["A"].items() if k not in strip}


def test_resume_of_a_finished_experiment_reports_it_again(url: str) -> None:
    first = pxp(url, *RUN, "--name", "A", "--format", "json", "--no-progress")
    res = pxp(url, "run", "--resume", "A", "--format", "json", "--no-progress")
    assert res.exit_code == 0 and "already finished" in res.stderr
    assert _json(res) == _json(first)


def test_run_errors_are_one_line(url: str) -> None:
    for args, msg in [
        (["run", "--resume", "nope"], "no experiment named 'nope'"),
        (["run", "--like", "nope"], "no experiment named 'nope'"),
        (["run"], "--dataset is required"),
        (["run", "--dataset", "toy-rad", "--split", "nope"], "no instances in split 'nope'"),
        (["run", "--dataset", "toy-rad", "--learn-metric", "f1"], "learn_metric must be one of"),
        (["run", "--dataset", "toy-rad", "--format", "yaml"], "unknown format 'yaml'"),
    ]:
        res = pxp(url, *args)
        assert res.exit_code == 1, (args, res.output)
        assert msg in res.output and "Traceback" not in res.output
    pxp(url, *RUN, "--name", "A", "--no-progress")
    res = pxp(url, "run", "--resume", "A", "--seed", "4")
    assert res.exit_code == 1 and "--resume continues with the stored config" in res.output
    res = pxp(url, "run", "--resume", "A", "--like", "A")
    assert res.exit_code == 1 and "cannot be combined" in res.output


def test_datasets_without_splits_interact_on_every_instance_and_say_so(db_url: str) -> None:
    make_drug(get_engine(db_url))  # every instance is in train; no val or test
    res = pxp(db_url, "run", "--dataset", "toy-drug", "--reps", "2", "--no-progress")
    assert res.exit_code == 0, res.output
    assert "no instances in validation split 'val'" in res.stderr
    assert "machine performance is not evaluated" in res.stderr


def test_paused_run_exits_2_and_resumes(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    make_text(get_engine(url))
    state = {"down": True}

    def handler(req: Any) -> Reply:
        if state["down"]:
            return Reply(status=529, error="overloaded")
        return answer("Pneumonia", "patchy airspace consolidation in the left lower zone with air bronchograms")

    with FakeLLM(handler) as server:
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")
        res = pxp(url, "run", "--yes", "--dataset", "toy-text", "--machine", "openai:gpt-test", "--base-url",
                  server.openai_url, "--reps", "2", "--name", "L", "--no-progress")
        assert res.exit_code == 2, res.output
        said = res.stderr.strip().splitlines()
        assert len(said) == 2 and said[0].startswith("paused: L repetitions 1, 2: ") and "overloaded" in said[0]
        assert said[1] == f"resume with: pxp --db {url} run --resume L"
        assert "Traceback" not in res.output
        with DB(get_engine(url)) as db:
            assert {r.status for r in db.exec(select(Run))} == {"paused"}
        state["down"] = False
        res = pxp(url, "run", "--resume", "L", "--no-progress", "--concurrency", "2")
        assert res.exit_code == 0, res.output
        assert "openai:gpt-test" in res.stdout  # the cost/latency summary names the model
    with DB(get_engine(url)) as db:
        assert {r.status for r in db.exec(select(Run))} == {"finished"}


def test_progress_is_rich_on_a_terminal_and_plain_elsewhere(engine: Any) -> None:
    import io

    from rich.console import Console

    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.controlled.progress import PlainProgress, RichProgress, make_progress
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.running.pxp.experiments import create_experiment

    make_rad(engine, per_label=4)
    for name, terminal in (("tty", True), ("pipe", False)):
        exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=2, learn=True), name=name)
        buf = io.StringIO()
        prog = make_progress(engine, exp.id or 0, Console(file=buf, force_terminal=terminal, width=160))
        assert isinstance(prog, RichProgress if terminal else PlainProgress)
        with prog:
            run_experiment(engine, exp.id or 0, observer=prog)
        text = buf.getvalue()
        assert "rep 1" in text and "rep 2" in text and "finished" in text and "calls" in text
        if terminal:
            assert "6/6" in text and "\x1b[" in text  # the bar, drawn with terminal escapes
        else:
            assert "rep 2: session 6 finished" in text and "\x1b[" not in text


def test_notes_go_through_the_progress_display_and_a_study_shares_one(engine: Any, capsys: Any) -> None:
    """The no-worker warning's path (docs/operations.md, Workers): above the bars on a terminal, a line of its own
    elsewhere."""
    import io

    from rich.console import Console

    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.controlled.progress import StudyProgress, make_progress
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.running.pxp.experiments import create_experiment

    make_rad(engine, per_label=4)
    for terminal in (True, False):
        ids = [create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=2), name=f"{x}{terminal}").id
               or 0 for x in "AB"]
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=terminal, width=160)
        with StudyProgress(engine, [(ids[0], "A"), (ids[1], "B")], console) as study:
            study.note("warning: study note")
            for eid in ids:
                run_experiment(engine, eid, observer=study.observers[eid])
        single = make_progress(engine, ids[0], console)
        with single:
            single.note("warning: single note")
        text = buf.getvalue()
        assert text.count("warning: study note") == 1 and text.count("warning: single note") == 1, text
        if terminal:
            assert "A rep 1" in text and "B rep 2" in text and "\x1b[" in text  # one display, a row per repetition
        else:
            assert "A: rep 1: session 6 finished" in text and "B: rep 2: finished" in text
    assert capsys.readouterr().err == ""  # nothing written past the display


def test_imported_experiments_cannot_be_resumed_or_repeated(url: str, tmp_path: Any) -> None:
    f = tmp_path / "t.jsonl"
    msgs = [(1, "machine", "INIT"), (2, "human", "RATIFY"), (3, "machine", "RATIFY")]
    f.write_text("".join(json.dumps({"session": "s", "instance": "x", "j": j, "sender": who, "tag": tag,
                                     "prediction": "p", "explanation": "e"}) + "\n" for j, who, tag in msgs))
    assert pxp(url, "import", "transcripts", str(f), "--name", "imp").exit_code == 0
    for opt in ("--resume", "--like"):
        res = pxp(url, "run", opt, "imp")
        assert res.exit_code == 1 and "only controlled experiments can be resumed or repeated" in res.output
