"""`pxp run --estimate`, `--max-usd` / `--yes`, and estimate beside actual in `pxp calls` (docs/research.md, Cost
estimate)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment
from tests.factories import make_rad, make_text
from tests.llm_server import FakeLLM, Reply, answer

cli = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def pxp(db_url: str, *args: str) -> Any:
    return cli.invoke(app, ["--db", db_url, *args], catch_exceptions=False)


def _experiments(url: str) -> list[Experiment]:
    with DB(get_engine(url)) as db:
        return list(db.exec(select(Experiment)).all())


@pytest.fixture
def url(db_url: str) -> str:
    make_rad(get_engine(db_url), per_label=4)
    return db_url


def test_estimate_json_prints_the_figures_and_starts_nothing(url: str) -> None:
    res = pxp(url, "run", "--dataset", "toy-rad", "--reps", "2", "--estimate", "--format", "json")
    assert res.exit_code == 0, res.output
    est = json.loads(res.stdout)
    assert {"calls", "tokens_in", "tokens_out", "usd", "assumptions"} <= set(est)
    assert abs(est["calls"] - 2 * est["per_repetition"]["calls"]) <= 1 and est["calls"] > 0  # rounded
    assert est["usd"] == 0.0 and est["tokens_in"] == 0  # simulated: nothing paid
    assert _experiments(url) == []
    table = pxp(url, "run", "--dataset", "toy-rad", "--estimate")
    assert table.exit_code == 0 and "Estimate (before the run)" in table.stdout and "Assumptions:" in table.stdout
    assert "test evaluations" in table.stdout and "LEARN validation" in table.stdout


def test_an_unknown_price_is_null(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    res = pxp(url, "run", "--dataset", "toy-rad", "--machine", "openai:local-model", "--estimate",
              "--format", "json")
    assert res.exit_code == 0, res.output
    est = json.loads(res.stdout)
    assert est["usd"] is None and est["tokens_in"] > 0
    assert any("no price is known" in a for a in est["assumptions"])


def test_over_max_usd_without_a_terminal_needs_yes(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    make_text(get_engine(db_url))
    run = ["run", "--dataset", "toy-text", "--machine", "openai:gpt-4.1", "--no-progress", "--name", "G"]
    res = pxp(db_url, *run, "--max-usd", "0")
    assert res.exit_code == 1 and "over --max-usd 0" in res.stderr and "--yes" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and _experiments(db_url) == []
    # under the threshold (default 20) it starts without asking; --yes starts it over the threshold
    with FakeLLM(lambda req: answer("Pneumonia", "patchy consolidation in the left lower zone")) as server:
        res = pxp(db_url, *run, "--max-usd", "0", "--yes", "--base-url", server.openai_url)
        assert res.exit_code == 0, res.output
    [exp] = _experiments(db_url)
    assert exp.config["estimate"]["usd"] > 0 and exp.config["estimate"]["calls"] > 0
    calls = pxp(db_url, "calls", "--experiment", "G", "--format", "json")
    versus = json.loads(calls.stdout)["estimate"]
    total = versus[-1]
    assert total["purpose"] == "all" and total["calls_estimated"] == exp.config["estimate"]["calls"]
    assert total["calls_actual"] == json.loads(calls.stdout)["total"]["calls"]
    table = pxp(db_url, "calls", "--experiment", "G")
    assert "Estimate and actual calls of G" in table.stdout
    report = pxp(db_url, "report", "--experiment", "G", "--calls")
    assert report.exit_code == 0 and "Estimate and actual calls of G" in report.stdout
    report_json = json.loads(pxp(db_url, "report", "--experiment", "G", "--calls", "--format", "json").stdout)
    assert report_json["calls"]["estimate"][-1]["calls_estimated"] == exp.config["estimate"]["calls"]


def _on_a_terminal(args: list[str], reply: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `pxp ARGS` with a pseudo-terminal as stdin, answer the prompt with `reply`."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pxp.cli.main", *args], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(follower)
    os.write(leader, reply.encode() + b"\n")
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, stderr.decode()


def test_over_max_usd_on_a_terminal_asks(db_url: str) -> None:
    make_text(get_engine(db_url))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(ROOT)}
    args = ["--db", db_url, "run", "--dataset", "toy-text", "--machine", "openai:gpt-4.1", "--no-progress",
            "--max-usd", "0", "--name", "T"]
    code, stderr = _on_a_terminal(args, "n", env)
    assert code == 1 and "Start the run anyway?" in stderr and "not started" in stderr
    assert _experiments(db_url) == []
    with FakeLLM(lambda req: Reply(data={"prediction": "Pneumonia", "explanation": "patchy consolidation"})) as s:
        code, stderr = _on_a_terminal([*args, "--base-url", s.openai_url], "y", env)
    assert code == 0, stderr
    assert [e.name for e in _experiments(db_url)] == ["T"]


def test_an_unknown_cost_asks_like_one_over_the_limit(db_url: str) -> None:
    """Unknown cost is not zero cost: a model pxp has no price for needs --yes without a terminal, and is asked
    about on one, with the reason; nothing is stored before the answer."""
    make_text(get_engine(db_url))
    run = ["run", "--dataset", "toy-text", "--machine", "openai:my-local-model", "--no-progress", "--name", "U"]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pxp.cli.main", "--db", db_url, *run], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "the cost is unknown: pxp has no price for openai:my-local-model" in done.stderr
    assert "--yes" in done.stderr and _experiments(db_url) == []
    code, stderr = _on_a_terminal(["--db", db_url, *run], "n", env)
    assert code == 1 and "cost is unknown" in stderr and "Start the run anyway?" in stderr
    assert _experiments(db_url) == []
    with FakeLLM(lambda req: Reply(data={"prediction": "Pneumonia", "explanation": "patchy consolidation"})) as s:
        res = pxp(db_url, *run, "--yes", "--base-url", s.openai_url)
    assert res.exit_code == 0, res.output
    [exp] = _experiments(db_url)
    assert exp.config["estimate"]["usd"] is None and exp.config["estimate"]["unpriced"] == ["openai:my-local-model"]


def test_probe_calls_estimated_and_compared(url: str) -> None:
    """`--probe`: the estimate has the probe calls (json and table), and `pxp calls` sets them beside the stored
    ones; n = 3 gives one human message per session, so with the simulated machine they are equal."""
    run = ["run", "--dataset", "toy-rad", "--split", "train", "--n", "3", "--k", "2", "--reps", "2", "--probe"]
    est = json.loads(pxp(url, *run, "--estimate", "--format", "json").stdout)
    assert est["by_purpose"]["probe"]["calls"] > 0
    assert any(a.startswith("--probe: 3 private questions") for a in est["assumptions"])
    assert "common-ground probes" in pxp(url, *run, "--estimate").stdout
    res = pxp(url, *run, "--no-progress", "--name", "P")
    assert res.exit_code == 0, res.output
    calls = json.loads(pxp(url, "calls", "--experiment", "P", "--format", "json").stdout)
    [probe] = [r for r in calls["estimate"] if r["purpose"] == "probe"]
    stored = sum(r["calls"] for r in calls["rows"] if r["purpose"] == "probe")
    assert probe["calls_estimated"] == probe["calls_actual"] == stored == est["by_purpose"]["probe"]["calls"]
    assert "probe" in pxp(url, "calls", "--experiment", "P").stdout
