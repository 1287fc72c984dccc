"""The spine's CLI end to end: import transcripts, report, run, validate (issue: the spine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from tests.factories import make_drug, make_rad

runner = CliRunner()


def pxp(db_url: str, *args: str) -> Any:
    return runner.invoke(app, ["--db", db_url, *args], catch_exceptions=False)


def line(session: str, j: int, sender: str, tag: str, **kw: Any) -> str:
    rec = {
        "session": session,
        "instance": f"x-{session}",
        "j": j,
        "sender": sender,
        "tag": tag,
        "prediction": kw.pop("prediction", "p"),
        "explanation": kw.pop("explanation", "e"),
        **kw,
    }
    return json.dumps(rec)


# The DESIGN §2 vectors (the illegal one is tested apart), with the facts that give each tag.
VECTORS = [
    line("v1", 1, "machine", "INIT"),
    line("v1", 2, "human", "ratify", match=True, agree=True, changed=False),
    line("v1", 3, "machine", "Ratify", match=True, agree=True, changed=False),
    line("v2", 1, "machine", "INIT"),
    line("v2", 2, "human", "REFUTE", match=False, agree=True, changed=False),
    line("v2", 3, "machine", "REVISE", match=False, agree=True, changed=True, prediction="q"),
    line("v2", 4, "human", "RATIFY", match=True, agree=True, changed=False),
    line("v2", 5, "machine", "RATIFY", match=True, agree=True, changed=False, prediction="q"),
    line("v4", 1, "machine", "INIT"),
    line("v4", 2, "human", "REFUTE", match=False, agree=False, changed=False),
    line("v4", 3, "machine", "REFUTE", match=False, agree=False, changed=False),
    line("v4", 4, "human", "REJECT", match=False, agree=False, changed=False),
]


def test_import_vectors_and_report_json(tmp_path: Path, db_url: str) -> None:
    f = tmp_path / "vectors.jsonl"
    f.write_text("\n".join(VECTORS) + "\n")
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "vectors", "--n", "10", "--k", "3")
    assert res.exit_code == 0, res.output
    assert "imported 3 sessions (12 messages)" in res.output
    rep = json.loads(pxp(db_url, "report", "--experiment", "vectors", "--format", "json").stdout)
    assert rep["experiment"] == "vectors" and rep["repetitions"] == 1
    assert rep["total_sessions"] == 3 and rep["aborted_sessions"] == 0
    counts = {k: v["count"] for k, v in rep["metrics"].items()}
    assert counts == {
        "one_way_human": 2,
        "one_way_machine": 2,
        "two_way": 2,
        "strong_human": 1,
        "strong_machine": 2,
        "ultra_strong_human": 0,
        "ultra_strong_machine": 1,
    }
    assert rep["metrics"]["two_way"]["proportion"] == pytest.approx(0.6667)
    # by bound: v1 is two-way from j=3, v2 from j=4
    assert rep["by_message"]["two_way"] == [0, 0, 1, 2, 2, 2, 2, 2, 2, 2]
    assert rep["by_message"]["one_way_machine"] == [0, 0, 2, 2, 2, 2, 2, 2, 2, 2]
    table = pxp(db_url, "report", "--experiment", "vectors").stdout
    assert "2-way intelligible sessions" in table and "2 (0.67)" in table
    md = pxp(db_url, "report", "--experiment", "vectors", "--format", "markdown").stdout
    assert md.startswith("| Count | vectors |")
    csv_out = pxp(db_url, "report", "--experiment", "vectors", "--format", "csv").stdout
    assert "vectors,two_way,2-way intelligible sessions,1,2,3,0.6667,2,2,0" in csv_out
    assert pxp(db_url, "validate").exit_code == 0


def test_nonconformant_transcripts_are_refused_unless_allowed(tmp_path: Path, db_url: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join([line("s", 1, "machine", "INIT"), line("s", 2, "human", "REVISE")]) + "\n")
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "bad", "--n", "10", "--k", "3")
    assert res.exit_code == 1
    assert "message 2: REVISE is impossible at message 2" in res.output
    assert "Traceback" not in res.output
    assert pxp(db_url, "report", "--experiment", "bad").exit_code == 1  # nothing was stored
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "bad", "--allow-nonconformant")
    assert res.exit_code == 0
    res = pxp(db_url, "validate", "--experiment", "bad")
    assert res.exit_code == 1 and "REVISE is impossible at message 2" in res.output


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "the file is empty"),
        ("{not json\n", "bad.jsonl:1: not valid JSON"),
        (json.dumps({"session": "s", "j": 1}) + "\n", "bad.jsonl:1: missing instance, sender, tag"),
        (line("s", 1, "machine", "AGREE") + "\n", "bad.jsonl:1: unknown tag 'AGREE'"),
        (line("s", 1, "oracle", "INIT") + "\n", "unknown sender"),
        (line("s", 2, "human", "REFUTE", match="maybe") + "\n", "match must be true, false or null"),
    ],
)
def test_malformed_transcripts_give_one_line_reasons(tmp_path: Path, db_url: str, content: str, reason: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "bad")
    assert res.exit_code == 1 and reason in res.output and "Traceback" not in res.output


def test_a_message_number_twice_is_refused_even_when_nonconformant_is_allowed(tmp_path: Path, db_url: str) -> None:
    """The store keys messages by (session, j): a repeated j is a file error with its line, not a database error."""
    f = tmp_path / "dup.jsonl"
    f.write_text("\n".join([line("s", 1, "machine", "INIT"), line("s", 2, "human", "REFUTE"),
                            line("s", 2, "human", "REFUTE")]) + "\n")
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "dup", "--allow-nonconformant")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "dup.jsonl:3: message 2 of session s (repetition 1) is also on line 2" in res.output
    assert "database error" not in res.output
    assert pxp(db_url, "report", "--experiment", "dup").exit_code == 1  # nothing was stored


def test_a_bound_below_one_is_refused_even_when_nonconformant_is_allowed(tmp_path: Path, db_url: str) -> None:
    f = tmp_path / "ok.jsonl"
    f.write_text("\n".join(VECTORS) + "\n")
    for flag, value, why in (("--n", "0", "must be at least 2"), ("--k", "0", "must be at least 1")):
        res = pxp(db_url, "import", "transcripts", str(f), "--name", "zero", flag, value, "--allow-nonconformant")
        assert res.exit_code == 1 and why in res.output
        assert pxp(db_url, "report", "--experiment", "zero").exit_code == 1


def test_run_twice_with_the_same_seed_gives_identical_reports(db_url: str) -> None:
    engine = get_engine(db_url)
    make_rad(engine)
    make_drug(engine)
    reports = []
    for name in ("a", "b"):
        res = pxp(
            db_url,
            "run",
            "--dataset",
            "toy-rad",
            "--machine",
            "simulated",
            "--human",
            "proxy",
            "--reps",
            "3",
            "--n",
            "10",
            "--k",
            "3",
            "--seed",
            "7",
            "--name",
            name,
            "--format",
            "json",
        )
        assert res.exit_code == 0, res.output
        rep = json.loads(res.stdout)
        rep.pop("experiment")
        reports.append(rep)
    assert reports[0] == reports[1]
    # the agents interact on the train split (3 of 10); val and test serve LEARN and evaluation
    assert reports[0]["total_sessions"] == 3 and reports[0]["repetitions"] == 3
    other = json.loads(
        pxp(db_url, "run", "--dataset", "toy-rad", "--reps", "3", "--seed", "8", "--format", "json").stdout
    )
    other.pop("experiment")
    assert other != reports[0]  # the seed matters
    res = pxp(db_url, "run", "--dataset", "toy-drug", "--reps", "2", "--seed", "1")
    assert res.exit_code == 0 and "Total sessions" in res.output
    res = pxp(db_url, "validate")
    assert res.exit_code == 0 and "conform" in res.output


def test_run_errors_are_one_line(db_url: str) -> None:
    get_engine(db_url)  # an existing database (a failed run into a new one leaves none behind)
    res = pxp(db_url, "run", "--dataset", "nope")
    assert res.exit_code == 1 and "no dataset named 'nope'" in res.output
    res = pxp(db_url, "report", "--experiment", "nope")
    assert res.exit_code == 1 and "no experiment named 'nope'" in res.output


def test_console_script_reports_unexpected_errors_in_one_line(tmp_path: Path) -> None:
    bad_url = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    res = subprocess.run(
        [sys.executable, "-c", "from pxp.cli.main import main; main()", "--db", bad_url, "validate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and res.stderr.strip().startswith("error:")
    assert len(res.stderr.strip().splitlines()) <= 2


def test_report_shows_call_totals_per_run(db_url: str) -> None:
    make_rad(get_engine(db_url))
    res = pxp(db_url, "run", "--dataset", "toy-rad", "--reps", "2", "--seed", "3", "--name", "c", "--no-progress")
    assert res.exit_code == 0, res.output
    rep = json.loads(pxp(db_url, "report", "--experiment", "c", "--calls", "--format", "json").stdout)
    rows = rep["calls"]["rows"]
    assert {r["repetition"] for r in rows} == {1, 2}
    asks = sum(r["calls"] for r in rows if r["purpose"] == "ask")
    # the simulated machine is asked once per machine message: ceil(len/2) per session
    machine_messages = sum(
        (len(t) + 1) // 2 for t in _session_lengths(db_url, "c")
    )
    assert asks == machine_messages and rep["calls"]["total"]["errors"] == 0
    table = pxp(db_url, "report", "--experiment", "c", "--calls").stdout
    assert "LLM calls of c" in table and "simulated:simulated" in table


def _session_lengths(db_url: str, name: str) -> list[list[int]]:
    from sqlmodel import Session as DB
    from sqlmodel import select

    from pxp.storage.tables import Experiment, Message, Run, Session

    with DB(get_engine(db_url)) as db:
        rows = db.exec(
            select(Message.session_id, Message.j)
            .join(Session, Session.id == Message.session_id)  # type: ignore[arg-type]
            .join(Run, Run.id == Session.run_id)  # type: ignore[arg-type]
            .join(Experiment, Experiment.id == Run.experiment_id)  # type: ignore[arg-type]
            .where(Experiment.name == name)
        ).all()
    by: dict[int, list[int]] = {}
    for sid, j in rows:
        by.setdefault(sid, []).append(j)
    return list(by.values())
