"""Current default models and warnings about deprecated or unknown models.

Deprecations come from the installed anthropic SDK's own table (the one behind its
DeprecationWarning), so they follow SDK updates. A model is "unknown" when the provider's
model list (when it was fetched, `served`) does not name it. Checked 2026-11-23.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, cast

from pxp.llm.base import is_llm_spec, parse_spec

# the rough token counts live in pxp.llm.local (its context-window errors use them); exported here too
from pxp.llm.local import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from pxp.llm.local import IMAGE_TOKENS as IMAGE_TOKENS
from pxp.llm.local import estimate_tokens as estimate_tokens

#: the examples and suggestions pxp shows; current (not deprecated) models, checked 2026-11-23
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
DEFAULT_CHECKERS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4.1-mini"}

#: context windows (input tokens) of the default models and their close relatives, checked 2026-11-23;
#: a model not listed has an unknown window and gets no context warning
CONTEXT_WINDOWS: dict[tuple[str, str], int] = {
    ("anthropic", "claude-opus-4-6"): 200_000,
    ("anthropic", "claude-opus-4-5"): 200_000,
    ("anthropic", "claude-sonnet-4-6"): 200_000,
    ("anthropic", "claude-sonnet-4-5"): 200_000,
    ("anthropic", "claude-haiku-4-5"): 200_000,
    ("openai", "gpt-4.1"): 1_047_576,
    ("openai", "gpt-4.1-mini"): 1_047_576,
    ("openai", "gpt-4.1-nano"): 1_047_576,
    ("openai", "gpt-4o"): 128_000,
    ("openai", "gpt-4o-mini"): 128_000,
}
def context_window(spec: str) -> int | None:
    """The context window of a provider:model spec (a date suffix allowed), or None when unknown."""
    if not is_llm_spec(spec):
        return None
    provider, model = parse_spec(spec)
    if (provider, model) in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[(provider, model)]
    for (p, m), window in CONTEXT_WINDOWS.items():
        if p == provider and (model.startswith(m + "-2") or model == m + "-latest"):
            return window
    return None


def _anthropic_deprecations() -> dict[str, str]:
    try:
        module = importlib.import_module("anthropic.resources.messages.messages")
    except ImportError:  # an SDK without the module
        return {}
    table = getattr(module, "DEPRECATED_MODELS", None)  # not exported by every SDK version
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}


def deprecation(provider: str, model: str) -> str | None:
    """The end-of-life date the provider's SDK gives for `model`, or None."""
    if provider == "anthropic":
        return _anthropic_deprecations().get(model)
    return None


def model_warning(spec: str, served: Sequence[str] | None = None) -> str | None:
    """One warning line for a provider:model spec: deprecated, or not among the served models."""
    if not is_llm_spec(spec):
        return None
    provider, model = parse_spec(spec)
    eol = deprecation(provider, model)
    if eol is not None:
        return (f"{spec} is deprecated (end of life {eol}); use a current model such as "
                f"{provider}:{DEFAULT_MODELS[provider]}")
    if served is not None and model not in served:
        shown = ", ".join(sorted(served)[:8]) + (", ..." if len(served) > 8 else "")
        return f"{spec}: the server does not list this model (it serves {shown or 'none'})"
    return None


def read_models(server: str, status: int, content_type: str, body: bytes) -> list[str]:
    """What GET /v1/models answered (OpenAI's and Anthropic's format: `{"data": [{"id": ...}, ...]}`), sorted;
    ReplyError (one line: the server, the status, what was wrong) for anything else."""
    from pxp.llm.errors import ReplyError, read_json, reply_line

    data = read_json(server, status, content_type, body)
    items = data.get("data") if isinstance(data, dict) else None
    problem = "no `data` list of models" if not isinstance(items, list) else next(
        (f"a model without an `id` in `data` ({str(m)[:40]!r})" for m in items
         if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not m["id"].strip()), None)
    if problem is not None or not isinstance(items, list):
        raise ReplyError(reply_line(server, status, content_type, body, str(problem)), status=status)
    return sorted(str(m["id"]) for m in items)


def served_models(spec: str, base_url: str | None = None) -> list[str]:
    """The model ids the provider of `spec` serves: its GET /v1/models through the SDK (its key, headers and
    base URL), read by `read_models`. Raises LLMConfigError without a key, LLMError (one line, redacted) when the
    server cannot be reached or answers what is not a model list."""
    from pxp.llm.base import LLMError, ProviderOptions
    from pxp.llm.errors import describe_error
    from pxp.llm.registry import make_provider

    provider, model = parse_spec(spec)
    p = make_provider(spec, ProviderOptions(base_url=base_url or None, max_retries=0, timeout=10))
    client: Any = cast(Any, p).client
    try:  # one page: Anthropic's holds up to 1000 models, OpenAI's is the whole list
        raw = client.models.with_raw_response.list(**({"limit": 1000} if provider == "anthropic" else {}))
        reply = raw.http_response
    except Exception as e:  # an HTTP error status: read like any reply; no connection, a timeout: the SDK's line
        reply = getattr(e, "response", None)
        if reply is None or getattr(e, "status_code", None) is None:
            raise LLMError(describe_error(provider, model, e, getattr(p, "options", None))) from None
    return read_models(f"{provider}:{model}: {reply.request.url}", reply.status_code,
                       reply.headers.get("content-type", ""), reply.content)


def run_warnings(specs: Sequence[str]) -> list[str]:
    """Model warnings for the LLM roles of a run, before it starts (pxp run, Experiments)."""
    out: list[str] = []
    for spec in dict.fromkeys(specs):
        w = model_warning(spec)
        if w is not None:
            out.append(w)
    return out


def model_checks(specs: Sequence[str], base_url: str | None = None) -> list[str]:
    """Settings: for each LLM role, the models its provider serves (when a key or base URL is
    configured) and a deprecation or unknown-model warning; one line each."""
    from pxp.llm.base import LLMConfigError, LLMError

    out: list[str] = []
    for spec in dict.fromkeys(specs):
        if not is_llm_spec(spec):
            continue
        provider = parse_spec(spec)[0]
        served: list[str] | None = None
        try:
            served = served_models(spec, base_url if provider == "openai" else None)
        except LLMConfigError:
            served = None  # no key: nothing to ask (Settings says which key is missing)
        except LLMError as e:
            out.append(f"cannot list the models of {provider}: {e}")
        w = model_warning(spec, served)
        if w is not None:
            out.append(w)
    return out
