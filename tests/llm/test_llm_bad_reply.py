"""A 200 reply the SDK cannot read (truncated JSON, a proxy's HTML page) is a
clear, resumable pause like a transport error, on the OpenAI and Anthropic paths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.llm.base import LLMError, ProviderOptions
from pxp.llm.registry import make_provider
from pxp.storage.store import db_session
from pxp.storage.tables import LLMCall, Message, Session
from tests.cli.test_llm_cli import _drug_first
from tests.factories import make_drug
from tests.llm.test_llm_errors import PROMPT
from tests.llm_server import FakeLLM, Reply, adopting_model

cli = CliRunner()
KEY = "sk-test-echoed-0123456789"
TRUNCATED = Reply(raw=b'{"id": "chatcmpl-1", "object": "chat.completion", "model": "m", "choices": [{"mes')
HTML = Reply(raw=b"<html><head><title>502 Bad Gateway</title></head><body>proxy error " + KEY.encode()
             + b"</body></html>", content_type="text/html; charset=utf-8")
#: JSON nested deeper than Python reads (the SDK's own parsing stops with RecursionError)
DEEP = Reply(raw=b'{"id": "msg-1", "choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
SPECS = ["anthropic:claude-haiku-4-5", "openai:gpt-4o-mini"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")
        yield s


def _url(spec: str, s: FakeLLM) -> str:
    return s.url if spec.startswith("anthropic") else s.openai_url


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(("reply", "shows"), [(TRUNCATED, "application/json"), (HTML, "text/html"),
                                              (DEEP, "application/json")], ids=["truncated", "html", "deep"])
def test_unreadable_reply_is_one_line(server: FakeLLM, spec: str, reply: Reply, shows: str) -> None:
    server.handler = lambda req: reply
    url = _url(spec, server)
    with pytest.raises(LLMError) as e:
        make_provider(spec, ProviderOptions(base_url=url, max_retries=0)).complete(PROMPT, max_tokens=20)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{spec}: unreadable reply from {url} (HTTP 200, {shows}")
    assert ("starts '<html><head>" in msg) if reply is HTML else ("starts '{\"id\"" in msg)
    assert "can be resumed" in msg and KEY not in msg


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("reply", [TRUNCATED, HTML], ids=["truncated", "html"])
def test_unreadable_reply_pauses_and_resumes(engine: Engine, db_url: str, server: FakeLLM, spec: str,
                                             reply: Reply) -> None:
    make_drug(engine, "drug")
    server.handler = lambda req: reply
    base = ["--base-url", server.openai_url] if spec.startswith("openai") else []
    r = cli.invoke(app, ["--db", db_url, "run", "--dataset", "drug", "--machine", spec, "--name", "bad",
                         "--no-progress", *base])
    out = r.stdout + r.stderr
    assert r.exit_code == 2, out
    assert "unreadable reply" in out and "Traceback" not in out and KEY not in out
    with db_session(engine) as db:
        assert not db.exec(select(Message)).all()
        errors = db.exec(select(LLMCall).where(col(LLMCall.error).is_not(None))).all()
    assert errors and all("unreadable reply" in (c.error or "") for c in errors)
    server.handler = adopting_model(_drug_first)
    r = cli.invoke(app, ["--db", db_url, "run", "--resume", "bad", "--no-progress"])
    assert r.exit_code == 0, r.stdout + r.stderr
    with db_session(engine) as db:
        assert all(s.status == "finished" for s in db.exec(select(Session)).all())
