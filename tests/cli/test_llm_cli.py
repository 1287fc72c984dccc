"""`pxp run --machine anthropic:<model> / openai:<model>` end to end against the local
wire-format server; `pxp calls`; custom tasks through `pxp task check/attach`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.storage.store import db_session
from pxp.storage.tables import Dataset, Instance, LLMCall, Message, Session
from pxp.tasks.custom import EXAMPLES
from tests.factories import make_drug, make_rad_images
from tests.llm_server import FakeLLM, Reply, Request, adopting_model, answer

cli = CliRunner()
CLAUDE = "anthropic:claude-sonnet-4-6"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "1")
        yield s


def _pxp(db_url: str, *args: str) -> tuple[int, str, str]:
    r = cli.invoke(app, ["--db", db_url, *args])
    return r.exit_code, r.stdout, r.stderr


def _rad_first(req: Request) -> Reply:
    return answer("Pneumonia", "patchy airspace consolidation in the left lower zone")


def test_pxp_run_anthropic_rad(engine: Engine, db_url: str, server: FakeLLM) -> None:
    make_rad_images(engine, "rad-img", size=(1800, 1600))
    server.handler = adopting_model(_rad_first)
    code, out, err = _pxp(db_url, "run", "--dataset", "rad-img", "--machine", CLAUDE,
                          "--checker", "anthropic:claude-haiku-4-5", "--name", "rad-claude",
                          "--no-progress", "--format", "json")
    assert code == 0, err
    report = json.loads(out[: out.rindex("}") + 1])
    assert report["total_sessions"] >= 1
    assert _pxp(db_url, "validate")[0] == 0
    with db_session(engine) as db:
        msgs = db.exec(select(Message)).all()
        calls = db.exec(select(LLMCall)).all()
    assert msgs and msgs[0].tag == "INIT"
    assert {c.purpose for c in calls} >= {"ask", "agree"}
    assert all(c.provider == "anthropic" for c in calls)
    # every image sent was downscaled within Claude's limit
    import base64
    import io

    from PIL import Image

    sizes = [Image.open(io.BytesIO(base64.b64decode(d))).size for r in server.requests for _, d in r.images()]
    assert sizes and all(max(s) <= 1568 for s in sizes)

    code, out, err = _pxp(db_url, "calls", "--experiment", "rad-claude", "--format", "json")
    assert code == 0, err
    totals = json.loads(out)
    assert totals["total"]["calls"] == len(calls) == len(server.requests)
    assert totals["total"]["tokens_in"] == 100 * len(calls) and totals["total"]["cost_usd"] > 0
    assert {r["model"] for r in totals["rows"]} == {"claude-sonnet-4-6", "claude-haiku-4-5"}
    code, out, _ = _pxp(db_url, "calls", "--experiment", "rad-claude")
    assert code == 0 and "claude-haiku-4-5" in out
    assert _pxp(db_url, "calls", "--experiment", "nope")[0] == 1


def _drug_first(req: Request) -> Reply:
    text = " ".join(req.texts())
    for target, reactants, expl in [
        ("CC(=O)Nc1ccc(O)cc1", "Nc1ccc(O)cc1.CC(=O)OC(C)=O",
         "Acetylation of the amine of 4-aminophenol with acetic anhydride gives the acetanilide."),
        ("CC(=O)Oc1ccccc1C(=O)O", "O=C(O)c1ccccc1O.CC(=O)Cl", "Esterification of salicylic acid."),
    ]:
        if target in text:
            return answer(reactants, expl)
    return answer("CC(C)Cc1ccc(C(C)C#N)cc1.O", "Nitrile hydrolysis gives the acid.")


def test_pxp_run_openai_drug_with_base_url(engine: Engine, db_url: str, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    server.handler = adopting_model(_drug_first)
    code, _out, err = _pxp(db_url, "run", "--yes", "--dataset", "drug", "--machine", "openai:llama3.1",
                          "--checker", "openai:llama3.1", "--base-url", server.openai_url,
                          "--name", "drug-local", "--no-progress", "--format", "json")
    assert code == 0, err
    assert _pxp(db_url, "validate")[0] == 0
    with db_session(engine) as db:
        sessions = db.exec(select(Session)).all()
        calls = db.exec(select(LLMCall)).all()
    assert len(sessions) == 3 and all(s.status == "finished" for s in sessions)
    # no OPENAI_API_KEY: a local server gets a placeholder key, never a real one
    assert all(r.headers["authorization"] == "Bearer not-needed" for r in server.requests)
    assert all(r.path == "/v1/chat/completions" for r in server.requests)
    assert calls and all(c.cost_usd is None for c in calls)


def test_openai_without_key_or_base_url_is_one_line(engine: Engine, db_url: str, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    code, out, err = _pxp(db_url, "run", "--dataset", "drug", "--machine", "openai:gpt-4o", "--no-progress")
    assert code == 1
    assert "Traceback" not in err + out
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "no API key; set OPENAI_API_KEY" in line


def test_pxp_run_persistent_500_pauses_then_resumes(engine: Engine, db_url: str, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    server.handler = lambda req: Reply(status=503, error="overloaded")
    code, out, err = _pxp(db_url, "run", "--dataset", "drug", "--machine", CLAUDE, "--name", "flaky",
                          "--no-progress")
    assert code == 2, err
    assert "API error 503 (overloaded)" in " ".join(err.split()) and "Traceback" not in err + out
    assert _pxp(db_url, "validate")[0] == 0
    with db_session(engine) as db:
        assert not db.exec(select(Message)).all()
        assert all(s.status == "open" for s in db.exec(select(Session)).all())
        errors = db.exec(select(LLMCall).where(col(LLMCall.error).is_not(None))).all()
    assert errors and all("503" in (c.error or "") for c in errors)
    server.handler = adopting_model(_drug_first)
    code, out, err = _pxp(db_url, "run", "--resume", "flaky", "--no-progress")
    assert code == 0, err
    assert _pxp(db_url, "validate")[0] == 0
    with db_session(engine) as db:
        assert all(s.status == "finished" for s in db.exec(select(Session)).all())


def test_garbage_answers_abort_the_session_and_run_goes_on(engine: Engine, db_url: str,
                                                          server: FakeLLM) -> None:
    make_drug(engine, "drug")
    good = adopting_model(_drug_first)

    def handler(req: Request) -> Reply:
        if "CC(=O)Oc1ccccc1C(=O)O" in " ".join(req.texts()) and not req.is_checker:
            return Reply(text="As an AI I prefer not to say.")
        return good(req)

    server.handler = handler
    code, _out, err = _pxp(db_url, "run", "--dataset", "drug", "--machine", CLAUDE, "--no-progress")
    assert code == 0, err
    with db_session(engine) as db:
        statuses = [s.status for s in db.exec(select(Session).order_by(col(Session.ordinal))).all()]
        aborted = db.exec(select(Session).where(Session.status == "aborted")).one()
    assert statuses == ["finished", "aborted", "finished"]
    assert "5 attempts" in (aborted.abort_reason or "")
    assert _pxp(db_url, "validate")[0] == 0


# --- custom tasks ---------------------------------------------------------------------------

ADR = [
    ("Rash two days after amoxicillin, resolved on withdrawal, recurred on rechallenge.", "Certain",
     "Plausible timing with positive dechallenge and rechallenge."),
    ("Headache a month after starting a statin in a patient with migraine.", "Unlikely",
     "Timing is implausible and migraine is an alternative cause."),
]


def test_custom_task_config_runs_without_code(engine: Engine, db_url: str, server: FakeLLM,
                                              tmp_path: Path) -> None:
    example = EXAMPLES / "adr_causality.toml"
    code, out, err = _pxp(db_url, "task", "check", str(example))
    assert code == 0, err
    assert "MATCH label" in out and "Causality: <exactly one of: Certain, Probable" in out

    with db_session(engine) as db:
        ds = Dataset(name="adr", task="adr-causality")
        db.add(ds)
        db.flush()
        for o, (text, label, expl) in enumerate(ADR, start=1):
            db.add(Instance(dataset_id=ds.id or 0, key=f"case{o}", ordinal=o, payload=text,
                            reference_prediction=label, reference_explanation=expl))
    assert _pxp(db_url, "task", "attach", str(example), "--dataset", "adr")[0] == 0

    def first(req: Request) -> Reply:
        assert "Case report:" in req.last_user_text() and "WHO-UMC" in req.system()
        return Reply(text="**Causality:** possible\n**Explanation:** The timing fits; other causes remain.")

    server.handler = adopting_model(first)
    code, out, err = _pxp(db_url, "run", "--yes", "--dataset", "adr", "--machine", "openai:qwen2.5",
                          "--base-url", server.openai_url, "--no-progress")
    assert code == 0, err
    assert _pxp(db_url, "validate")[0] == 0
    with db_session(engine) as db:
        msgs = db.exec(select(Message).order_by(col(Message.session_id), col(Message.j))).all()
    assert msgs[0].prediction == "Possible" and msgs[1].tag in ("REFUTE", "REJECT")
    # agree = "llm" and no --checker: the generator's model checks explanations
    assert any(r.is_checker and "pharmacovigilance" in r.system() for r in server.requests)
    # the machine's message 3 reads the assessor's refutation in the task's own field names
    third = [r for r in server.requests if not r.is_checker][1]
    assert "Causality: Certain" in third.last_user_text()

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nmatch = "label"\n')
    code, out, err = _pxp(db_url, "task", "check", str(bad))
    assert code == 1 and "labels" in err and len(err.strip().splitlines()) == 1
    bad.write_text('name = "x"\nmatch = "regex"\n')
    code, _, err = _pxp(db_url, "task", "attach", str(bad), "--dataset", "adr")
    assert code == 1 and "match" in err


def test_pxp_console_script_subprocess(engine: Engine, db_url: str, server: FakeLLM) -> None:
    """The installed `pxp` entry point, environment variables as a user would set them."""
    make_drug(engine, "drug")
    server.handler = adopting_model(_drug_first)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-not-a-key", "ANTHROPIC_BASE_URL": server.url,
           "PXP_LLM_MAX_RETRIES": "1"}
    cmd = [sys.executable, "-c", "from pxp.cli.main import main; main()", "--db", db_url, "run", "--dataset",
           "drug", "--machine", CLAUDE, "--checker", "anthropic:claude-haiku-4-5", "--no-progress"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Total sessions" in r.stdout
    assert "sk-test-not-a-key" not in r.stdout + r.stderr
    assert {q.body["model"] for q in server.requests} == {"claude-sonnet-4-6", "claude-haiku-4-5"}


def test_a_provider_answering_429_for_ever_pauses_with_its_one_line(engine: Engine, db_url: str,
                                                                     server: FakeLLM) -> None:
    """HTTP 429 on every call: the run pauses like every provider fault, its stderr the pause line and the
    resume line (the in-flight limit halving on the way is the server log's, not the user's)."""
    make_drug(engine, "drug")
    server.handler = lambda req: Reply(status=429, error="rate limited")
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-not-a-key", "ANTHROPIC_BASE_URL": server.url,
           "PXP_LLM_MAX_RETRIES": "1"}
    cmd = [sys.executable, "-c", "from pxp.cli.main import main; main()", "--db", db_url, "run", "--dataset",
           "drug", "--machine", CLAUDE, "--name", "limited", "--no-progress", "--concurrency", "8"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("note: ")]  # the dataset's own
    assert len(lines) == 2 and lines[0].startswith("paused: limited repetition 1: ") and "API error 429" in lines[0], \
        lines
    assert lines[1] == f"resume with: pxp --db {db_url} run --resume limited"
