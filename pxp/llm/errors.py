"""One line for the user from an SDK error (both SDKs share the error shapes), and from a reply a server
answered that pxp cannot read (`read_json`, the first step of each endpoint's parser: an empty body, an HTML page,
not JSON, an HTTP error; the server, the status and what was wrong, redacted)."""

from __future__ import annotations

import json
from typing import Any

from pxp.llm.base import ContextExceeded, LLMError
from pxp.llm.local import context_line, is_context_exceeded
from pxp.llm.redact import redact

_HINT = {
    401: "authentication failed: check the API key ({env})",
    403: "permission denied: the key cannot use this model",
    404: "not found: check the model name and base URL",
    429: "rate limited",
    529: "the API is overloaded",
}
_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def _server_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
    return ""


def api_error(provider: str, model: str, e: Exception, options: Any, asked: int | None = None) -> LLMError:
    """The LLMError of an SDK error: a ContextExceeded naming the model and the size asked when the
    server says the prompt does not fit its context window, else `describe_error`'s line."""
    status = getattr(e, "status_code", None)
    if status is not None and is_context_exceeded(status, f"{e} {getattr(e, 'body', '')}"):
        tail = "; nothing was stored and the session can be resumed"
        return ContextExceeded(redact(context_line(f"{provider}:{model}", _server_message(e) or str(e), asked,
                                                            getattr(e, "body", None)))
                               + tail, status=status)
    return LLMError(describe_error(provider, model, e, options), status=status)


def describe_error(provider: str, model: str, e: Exception, options: Any) -> str:
    """`_describe` redacted: a server may echo the API key in its error body."""
    return redact(_describe(provider, model, e, options))


def _describe(provider: str, model: str, e: Exception, options: Any) -> str:
    """E.g. `anthropic:claude-x: API error 500 (overloaded) after 2 retries; the step was not taken`."""
    retries = getattr(options, "max_retries", None)
    tries = (" after the SDK's retries" if retries is None
             else "" if retries == 0 else f" after {retries} retr{'y' if retries == 1 else 'ies'}")
    status = getattr(e, "status_code", None)
    who = f"{provider}:{model}"
    tail = "; nothing was stored and the session can be resumed"
    name = type(e).__name__
    if status is not None:
        hint = _HINT.get(status, "").format(env=_ENV.get(provider, "the key variable"))
        detail = _server_message(e)
        what = "; ".join(x for x in (hint, detail[:200]) if x)
        base = getattr(options, "base_url", None)
        where = f" from {base}" if base else ""
        return f"{who}: API error {status}{f' ({what})' if what else ''}{where}{tries}{tail}"
    if "Timeout" in name:
        timeout = getattr(options, "timeout", None)
        after = f" after {timeout:g}s" if timeout else ""
        return f"{who}: the request timed out{after}{tries}{tail}"
    if "Connection" in name:
        base = getattr(options, "base_url", None)
        where = f" {base}" if base else " the API"
        return f"{who}: cannot connect to{where}{tries}{tail}"
    return f"{who}: {name}: {str(e)[:200]}{tail}"


class ReplyError(LLMError):
    """A server's reply pxp cannot read: one line naming the server, the status and what was wrong."""


def body_problem(content_type: str, body: bytes) -> str | None:
    """What is wrong with a reply's body before its shape is looked at, or None when it is JSON."""
    text = body.strip()
    if not text:
        return "an empty body"
    if "html" in content_type.lower() or text[:1] == b"<":
        return "an HTML page, not JSON"
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return "text that is not JSON"
    return None


def reply_line(server: str, status: int, content_type: str, body: bytes, problem: str) -> str:
    """`server answered HTTP status (content type): problem; it starts '…'`, redacted."""
    head = " ".join(body[:80].decode("utf-8", "replace").split())
    starts = f"; it starts {head!r}" if head else ""
    return redact(f"{server} answered HTTP {status} ({content_type or 'no content type'}): {problem}{starts}")


def read_json(server: str, status: int, content_type: str, body: bytes) -> Any:
    """The JSON a server answered with a 2xx status, else ReplyError (docs/research.md, Local models)."""
    if not 200 <= status < 300:
        hint = _HINT.get(status, "an error, not an answer").format(env="the provider's key variable")
        raise ReplyError(reply_line(server, status, content_type, body, hint), status=status)
    problem = body_problem(content_type, body)
    if problem is not None:
        raise ReplyError(reply_line(server, status, content_type, body, problem), status=status)
    return json.loads(body)


def bad_reply(provider: str, model: str, raw: Any, options: Any, problem: str) -> str:
    """One line for a reply the SDK could not read (truncated JSON, a proxy's HTML page):
    the provider, the base URL and what came back (status, content type, first bytes), redacted."""
    raw = getattr(raw, "http_response", raw)  # the SDK's raw response wraps the httpx one
    status = getattr(raw, "status_code", "?")
    headers = getattr(raw, "headers", None) or {}
    ctype = headers.get("content-type", "no content type")
    try:
        head = " ".join(str(raw.text)[:80].split())
        problem = body_problem(ctype, raw.content) or problem  # an empty body, an HTML page, not JSON: said so
    except Exception:
        head = ""
    url = getattr(options, "base_url", None) or "the API"
    return redact(
        f"{provider}:{model}: unreadable reply from {url} (HTTP {status}, {ctype}, "
        f"starts {head!r}: {problem[:120]}); nothing was stored and the session can be resumed"
    )
