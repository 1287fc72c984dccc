"""One redaction for every text that comes from an LLM provider.

Error bodies, response text and SDK exception messages pass `redact` before they are
stored, logged, exported or shown: self-hosted and proxy servers may echo the API key.
The value of every configured key (environment, Streamlit secrets) and anything shaped
like a common key (`sk-…`, `sk-ant-…`, bearer tokens) becomes `[redacted]`.
"""

from __future__ import annotations

import os
import re
from typing import Any, TypeVar, cast

from pxp.llm.keys import KEY_NAMES, secret

REDACTED = "[redacted]"

#: key-shaped strings: sk-… / sk-ant-… (OpenAI, Anthropic, most proxies), bearer tokens,
#: and `api_key=…` style pairs
_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{6,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"
    r"|(?i:(?<=api[_-]key[=:\s\"']))\s*[A-Za-z0-9._\-]{12,}"
)
_MIN_KEY = 6  # shorter configured values (e.g. "1") are not keys; replacing them would garble text


def configured_keys() -> list[str]:
    """The values of every configured key: the environment, then Streamlit secrets."""
    values = []
    for name in KEY_NAMES:
        for value in (os.environ.get(name), secret(name)):
            if value and len(value.strip()) >= _MIN_KEY:
                values.append(value.strip())
    return sorted(set(values), key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every configured key and key-shaped string replaced by `[redacted]`."""
    if not text:
        return text
    for key in configured_keys():
        text = text.replace(key, REDACTED)
    return _SHAPES.sub(REDACTED, text)


T = TypeVar("T")


def redact_data(value: T) -> T:
    """`redact` applied to every string in a JSON-like value (a structured answer)."""
    if isinstance(value, str):
        return cast(T, redact(value))
    if isinstance(value, dict):
        return cast(T, {k: redact_data(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(T, [redact_data(v) for v in value])
    return value


def redact_any(value: Any) -> Any:
    """`redact` of a text that may be None."""
    return redact(value) if isinstance(value, str) else value


def accounting(call: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The accounting fields `names` of a call (a CallRecord or an llmcall row), its provider's `error` text redacted:
    never a key in what is stored or exported."""
    fields = {f: getattr(call, f) for f in names}
    fields["error"] = redact_any(fields["error"])
    return fields
