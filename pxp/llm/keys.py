"""API keys: the SDKs' environment variables, or Streamlit secrets when the app runs.

Keys are passed straight to the SDK; pxp never stores, logs or shows them.
"""

from __future__ import annotations

import os

#: the variables that may hold a key or token (read by the SDKs or by pxp)
KEY_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")


def _streamlit_secret(name: str) -> str | None:
    try:
        from streamlit.runtime import exists

        if not exists():
            return None
        import streamlit as st

        value = st.secrets.get(name)
    except Exception:
        return None
    return str(value) if value else None


def api_key(env_name: str) -> str | None:
    """The key in `env_name`, else the Streamlit secret of that name, else None."""
    return os.environ.get(env_name) or _streamlit_secret(env_name)
