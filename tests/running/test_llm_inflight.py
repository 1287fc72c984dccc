"""A call in flight when the process is killed is recorded when sent, so
`pxp calls` and `pxp report --calls` count it (outcome unknown) after the crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import make_engine, upgrade
from tests.cli.test_llm_cli import _drug_first
from tests.factories import make_drug
from tests.llm_server import FakeLLM, Reply, Request, adopting_model
from tests.running.test_resume import PXP, ROOT

cli = CliRunner()


def _db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    e = make_engine(url)
    upgrade(e)
    make_drug(e, "drug")
    e.dispose()
    return url


def _kill_while_hanging(server: FakeLLM, release: threading.Event, url: str, tmp_path: Path, name: str,
                        *extra: str, wait_for: int = 1) -> tuple[dict[str, str], int]:
    """Start a real `pxp run`, SIGKILL it once `wait_for` calls hang at the server; (env, calls sent)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": "sk-test-not-a-key",
           "ANTHROPIC_BASE_URL": server.url, "PXP_LLM_MAX_RETRIES": "0"}
    proc = subprocess.Popen([*PXP, "--db", url, "run", "--dataset", "drug", "--machine",
                             "anthropic:claude-haiku-4-5", "--reps", "1", "--name", name, "--no-progress", *extra],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(server.requests) < wait_for and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # with wait_for = --concurrency every slot holds a hanging call: nothing more is sent before the kill
    assert len(server.requests) >= wait_for, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    release.set()
    return env, len(server.requests)


def _hang(release: threading.Event) -> Callable[[Request], Reply]:
    def hang(req: Request) -> Reply:  # no call gets its reply before the kill
        release.wait(30)
        return Reply(status=500, error="too late")
    return hang


@pytest.mark.long
def test_killed_in_flight_call_is_counted_as_unknown(tmp_path: Path) -> None:
    url = _db(tmp_path)
    release = threading.Event()
    good = adopting_model(_drug_first)
    with FakeLLM(_hang(release)) as server:
        env, sent = _kill_while_hanging(server, release, url, tmp_path, "K")

        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "K", "--format", "json"])
        assert r.exit_code == 0, r.stderr
        total = json.loads(r.stdout)["total"]
        assert total["unknown"] == sent and total["calls"] == sent
        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "K"])
        assert f"{sent} call(s) were in flight" in r.stdout
        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "K", "--unknown", "--format", "json"])
        listed = json.loads(r.stdout)["unknown"]
        assert len(listed) == sent and {c["model"] for c in listed} == {"claude-haiku-4-5"}
        assert all(c["session_id"] and c["j"] == 1 for c in listed)  # the machine's first message
        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "K", "--unknown"])
        assert r.exit_code == 0 and "anthropic:claude-haiku-4-5" in r.stdout
        r = cli.invoke(app, ["--db", url, "report", "--experiment", "K", "--calls", "--format", "json"])
        assert r.exit_code == 0, r.stderr
        assert f'"unknown": {sent}' in r.stdout

        # resume finishes; the calls stored by then are complete, the lost one stays unknown
        server.handler = good
        res = subprocess.run([*PXP, "--db", url, "run", "--resume", "K", "--no-progress"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "K", "--format", "json"])
        total = json.loads(r.stdout)["total"]
        assert total["unknown"] == sent and total["calls"] == len(server.requests)


def test_a_call_killed_during_an_evaluation_is_counted_as_unknown(tmp_path: Path) -> None:
    """Machine-performance evaluations run on the runner's thread pool: their calls are journaled
    too, so a kill -9 during the evaluation before session 1 still counts what was sent."""
    url = _db(tmp_path)
    release = threading.Event()
    with FakeLLM(_hang(release)) as server:
        _, sent = _kill_while_hanging(server, release, url, tmp_path, "E", "--no-learn", "--test-split", "train",
                                      "--eval-at-start", "--concurrency", "3", wait_for=3)
        r = cli.invoke(app, ["--db", url, "calls", "--experiment", "E", "--format", "json"])
        assert r.exit_code == 0, r.stderr
        total = json.loads(r.stdout)["total"]
        assert total["unknown"] == sent and total["calls"] == sent
