"""API keys: the SDKs' environment variables, or another source the interface adds (the app
adds Streamlit secrets with `add_key_source`; the LLM layer never imports Streamlit).

Keys are passed straight to the SDK; pxp never stores, logs or shows them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

#: the variables that may hold a key or token (read by the SDKs or by pxp)
KEY_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")

KeySource = Callable[[str], "str | None"]
_SOURCES: list[KeySource] = []


def add_key_source(source: KeySource) -> None:
    """Also look keys up in `source` (name → value or None), after the environment; added once."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def secret(name: str) -> str | None:
    """The value of `name` in the added key sources (not the environment), else None."""
    for source in list(_SOURCES):
        try:
            value = source(name)
        except Exception:
            continue
        if value:
            return str(value)
    return None


def api_key(env_name: str) -> str | None:
    """The key in `env_name`, else the added sources' value of that name (Streamlit secrets), else None."""
    return os.environ.get(env_name) or secret(env_name)
