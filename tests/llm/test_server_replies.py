"""What a server answers is checked like a file (docs/research.md, Local models; docs/operations.md,
Troubleshooting): a local server answers each endpoint pxp reads (GET /v1/models, a chat call, an OpenID provider's
metadata) with an HTML page, invalid JSON, the wrong shape, an empty body and a 500; each is one line naming the
server, the status and what was wrong, in the CLI and in `pxp doctor`, never Python's exception text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from pxp.cli.app import _metadata_line
from pxp.cli.main import app
from pxp.llm.base import LLMError, ProviderOptions
from pxp.llm.models import model_checks
from pxp.llm.registry import make_provider
from tests.llm.test_llm_errors import PROMPT
from tests.llm_server import FakeLLM, Reply

KEY = "sk-test-echoed-0123456789"
PYTHON = ("Error:", "Traceback", "AttributeError", "JSONDecodeError", "KeyError", "TypeError")
#: (name, the reply, what the line says was wrong)
ANSWERS = [
    ("html", Reply(raw=b"<html><title>502 Bad Gateway</title>" + KEY.encode() + b"</html>",
                   content_type="text/html"), "(text/html): an HTML page, not JSON"),
    ("invalid-json", Reply(raw=b'{"data": [{"id": "m"'), "(application/json): text that is not JSON"),
    ("wrong-shape", Reply(raw=b'{"models": ["m"]}'), None),
    ("empty", Reply(raw=b""), "(application/json): an empty body"),
    ("500", Reply(status=500, raw=b'{"error": "upstream exploded"}'), "HTTP 500 (application/json): an error"),
]
IDS = [a[0] for a in ANSWERS]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            monkeypatch.setenv(name, KEY)
        for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "PXP_LLM_MAX_RETRIES"):
            monkeypatch.delenv(name, raising=False)
        yield s


def _clean(line: str) -> None:
    assert "\n" not in line.strip() and KEY not in line and not any(p in line for p in PYTHON), line


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(("name", "reply", "says"), ANSWERS, ids=IDS)
def test_a_model_list_that_is_not_one_is_one_line(server: FakeLLM, monkeypatch: pytest.MonkeyPatch, provider: str,
                                                  name: str, reply: Reply, says: str | None) -> None:
    server.get_reply = reply
    base = server.openai_url if provider == "openai" else server.url
    res: Any = CliRunner().invoke(app, ["models", "--provider", provider, "--base-url", base])
    out = res.stdout + res.stderr
    assert res.exit_code == 1 and res.stdout == "", out
    _clean(out)
    assert out.startswith(f"error: {provider}:any: {server.url}/v1/models") and " answered HTTP " in out, out
    assert (says or "HTTP 200 (application/json): no `data` list of models") in out, out
    # the app's Settings page and `pxp doctor` read the list with the same function (Anthropic's server: its variable)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    [line] = model_checks([f"{provider}:m"], base)
    _clean(line)
    assert line.startswith(f"cannot list the models of {provider}: {provider}:m: {server.url}/v1/models"), line


def test_a_model_list_with_an_entry_without_an_id_is_refused(server: FakeLLM) -> None:
    server.get_reply = Reply(raw=b'{"data": [{"id": "good"}, {"name": "no id"}]}')
    res: Any = CliRunner().invoke(app, ["models", "--base-url", server.openai_url])
    assert res.exit_code == 1 and "a model without an `id` in `data`" in res.stderr, res.stderr
    server.get_reply = None  # the real list again
    res = CliRunner().invoke(app, ["models", "--base-url", server.openai_url])
    assert res.exit_code == 0 and res.stdout.split() == sorted(server.models), res.stdout


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
@pytest.mark.parametrize(("name", "reply", "says"), ANSWERS, ids=IDS)
def test_a_chat_reply_that_is_not_one_is_one_line(server: FakeLLM, spec: str, name: str, reply: Reply,
                                                  says: str | None) -> None:
    server.handler = lambda req: reply
    url = server.openai_url if spec.startswith("openai") else server.url
    with pytest.raises(LLMError) as e:
        make_provider(spec, ProviderOptions(base_url=url, max_retries=0)).complete(PROMPT, max_tokens=20)
    line = str(e.value)
    _clean(line)
    if name == "500":
        assert line.startswith(f"{spec}: API error 500 from {url}"), line
    else:
        assert line.startswith(f"{spec}: unreadable reply from {url} (HTTP 200, "), line
        shape = "no list of choices" if spec.startswith("openai") else "no list of content blocks"
        assert (says.split(": ", 1)[1] if says else shape) in line, line


@pytest.mark.parametrize(("name", "reply", "says"), ANSWERS, ids=IDS)
def test_openid_metadata_that_is_not_metadata_is_a_cross(server: FakeLLM, name: str, reply: Reply,
                                                         says: str | None) -> None:
    server.get_reply = reply
    meta = f"{server.url}/.well-known/openid-configuration"
    ok, line = _metadata_line(meta)
    assert not ok
    _clean(line)
    assert line.startswith(f"login: {meta} answered HTTP "), line
    assert (says or "not an OpenID provider's metadata (no `issuer` or `authorization_endpoint`)") in line, line
    server.get_reply = Reply(raw=b'{"issuer": "http://x", "authorization_endpoint": "http://x/auth"}')
    assert _metadata_line(meta) == (True, f"login: {meta} answers")
