"""An API key echoed by a server (a self-hosted 401 body, a response text)
reaches no table, export file, log line, CLI output or app page: every provider text
passes pxp.llm.redact.redact."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, select
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from pxp.app.router import VIEWS
from pxp.cli.main import app
from pxp.llm.base import LLMError, ProviderOptions
from pxp.llm.redact import REDACTED, redact
from pxp.llm.registry import make_provider
from pxp.storage.tables import SQLModel
from tests.app.test_app import APP
from tests.factories import make_drug
from tests.llm.test_llm_errors import PROMPT
from tests.llm_server import FakeLLM, Reply

cli = CliRunner()
#: configured keys: one not shaped like any known key, one sk- key
ODD_KEY = "hospital-proxy-token-7f3a9c2e"
SK_KEY = "sk-proj-Zq81sLw0RkT5vYb2"
#: a key the server expects, echoed too (shaped like a key, never configured here)
EXPECTED = "sk-ant-api03-AbCdEf123456"


def leaked(text: str) -> list[str]:
    return [k for k in (ODD_KEY, SK_KEY, EXPECTED, "AbCdEf123456") if k in text]


def test_redact_configured_and_key_shaped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ODD_KEY)
    text = (f"invalid API key for openai: got '{ODD_KEY}', expected '{EXPECTED}'; "
            f"header Authorization: Bearer abcdefgh12345678; other {SK_KEY}")
    out = redact(text)
    assert leaked(out) == [] and "abcdefgh12345678" not in out
    assert out.count(REDACTED) == 4
    assert redact("Pneumonia: sk-like words such as risk-free stay") == (
        "Pneumonia: sk-like words such as risk-free stay")


@pytest.fixture
def echoing(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    """A self-hosted server that answers 401 with the key it got in the body."""
    def handler(req):  # type: ignore[no-untyped-def]
        got = req.headers.get("x-api-key") or req.headers.get("authorization", "").removeprefix("Bearer ")
        return Reply(status=401, error=f"invalid API key for {req.api}: got '{got}', expected '{EXPECTED}'")

    with FakeLLM(handler) as s:
        monkeypatch.setenv("OPENAI_API_KEY", ODD_KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", SK_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")
        yield s


@pytest.mark.parametrize("spec", ["anthropic:claude-haiku-4-5", "openai:gpt-4o-mini"])
def test_provider_error_is_redacted(echoing: FakeLLM, spec: str) -> None:
    url = echoing.url if spec.startswith("anthropic") else echoing.openai_url
    with pytest.raises(LLMError) as e:
        make_provider(spec, ProviderOptions(base_url=url, max_retries=0)).complete(PROMPT, max_tokens=20)
    assert "API error 401" in str(e.value) and "invalid API key" in str(e.value)
    assert leaked(str(e.value)) == [], str(e.value)


def _all_text(engine: Engine) -> str:
    """Every text column of every table, as one string."""
    out = []
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            if table.name not in inspect(engine).get_table_names():
                continue
            for row in conn.execute(select(table)).mappings():
                out.extend(str(v) for v in row.values() if v is not None)
    return "\n".join(out)


@pytest.mark.parametrize("machine", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
def test_key_reaches_no_table_export_log_or_page(
    engine: Engine, db_url: str, echoing: FakeLLM, machine: str, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    make_drug(engine, "drug")
    args = ["--db", db_url, "run", "--dataset", "drug", "--machine", machine, "--name", "leak",
            "--no-progress"]
    if machine.startswith("openai"):
        args += ["--base-url", echoing.openai_url]
    r = cli.invoke(app, args)
    assert r.exit_code == 2, r.stdout + r.stderr  # paused, resumable
    assert echoing.requests, "the server was called"
    assert "invalid API key" in r.stdout + r.stderr
    assert leaked(r.stdout + r.stderr) == []
    stored = _all_text(engine)
    assert "invalid API key" in stored  # the error is stored, redacted
    assert leaked(stored) == []
    for cmd in (["calls", "--experiment", "leak"], ["report", "--experiment", "leak", "--calls"]):
        r = cli.invoke(app, ["--db", db_url, *cmd])
        assert leaked(r.stdout + r.stderr) == [], cmd
    out = tmp_path / "export"
    r = cli.invoke(app, ["--db", db_url, "export", "--experiment", "leak", "--out", str(out)])
    assert r.exit_code == 0, r.stdout + r.stderr
    files = "\n".join(p.read_text() for p in out.iterdir())
    assert "invalid API key" in files and leaked(files) == []
    assert leaked("\n".join(rec.getMessage() for rec in caplog.records)) == []

    monkeypatch.setenv("PXP_DATABASE_URL", db_url)
    for page in ("experiments", "sessions"):
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        at.switch_page(str(VIEWS / f"{page}.py")).run()
        assert not at.exception, [e.value for e in at.exception]
        shown = [str(getattr(e, "value", "")) for e in at.main] + [
            d.value.to_string() for d in at.dataframe]
        shown += [str(e.value) for kind in ("markdown", "error", "warning", "info", "caption", "code")
                  for e in at.get(kind)]
        assert leaked("\n".join(shown)) == [], page
        if page == "experiments":
            assert "leak" in "\n".join(shown)  # the paused experiment is on the page
