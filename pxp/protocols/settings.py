"""Every setting pxp reads, declared once (docs/operations.md, Settings): each `PXP_*` environment variable and
each Streamlit secret, with its type, the values allowed and one line of meaning.

A value is checked where it comes in, never where it is used: a command checks the settings it uses when it
starts (`check`), the app checks them all, `pxp doctor` lists every bad one (`problems`), and the one reader
(`value`) refuses a bad value the same way. Each refusal is one line naming the variable, the value and what
is allowed (`SettingError`). An empty value is refused too: unset a variable to get its default. Pure: the
values come from the mapping given (the process environment by default, or a secrets table).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import MAX_MESSAGE_BOUND

ENV, SECRET = "environment", "Streamlit secret"

#: who reads a setting: each command checks the groups it uses when it starts (`pxp app` checks all)
USES = {
    "cli": "every command",
    "database": "every command that opens a database, and the app",
    "models": "commands that call a model (`pxp run`, `pxp worker`, `pxp models`, `pxp scorekeeping run`) and the app",
    "runs": "commands that run sessions (`pxp run`, `pxp worker`) and the app",
    "app": "the app (`pxp app`)",
}

_FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


class SettingError(PxpError, ValueError):
    """A setting with a value pxp does not accept: one line naming it, the value and what is allowed."""


@dataclass(frozen=True)
class Setting:
    """One setting: `kind` is int, float, flag, url (http(s)://host), database (a database URL), spec (a
    provider:model or `word`), key (an API key, never shown) or table (a TOML table, checked by pxp.team.config)."""

    name: str
    kind: str
    meaning: str
    uses: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    #: `low` itself is not allowed (a timeout of 0 s)
    above: bool = False
    #: 0 is allowed too, meaning "off" (a thinking budget)
    zero_off: bool = False
    #: the word a spec may be instead of provider:model
    word: str = ""
    sources: tuple[str, ...] = (ENV,)

    def allowed(self) -> str:
        """What is allowed, in words."""
        if self.kind in ("int", "float"):
            what = "a whole number" if self.kind == "int" else "a number"
            low, high = _num(self.low), _num(self.high)
            if self.high is None:
                span = f"above {low}" if self.above else f"at least {low}"
            else:
                span = f"above {low} and at most {high}" if self.above else f"from {low} to {high}"
            return f"{what} {span}" + (", or 0 for off" if self.zero_off else "")
        return {"flag": "1/0, true/false, yes/no or on/off",
                "url": "an http:// or https:// URL naming a host",
                "database": "a database URL (sqlite:///file.db or postgresql+psycopg://user@host/db)",
                "spec": f"{self.word} or provider:model (anthropic:… or openai:…)",
                "key": "the provider's API key (not empty)",
                "table": "a TOML table"}[self.kind]

    def shown_default(self) -> str:
        if self.default is None:
            return "none"
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        return _num(self.default) if isinstance(self.default, float) else str(self.default)


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


DECLARED: tuple[Setting, ...] = (
    Setting("PXP_DATABASE_URL", "database", "the database of every command without --db, and of the app",
            "database", "sqlite:///pxp.db", sources=(ENV, SECRET)),
    Setting("database_url", "database", "the app's database when PXP_DATABASE_URL is not set",
            "database", sources=(SECRET,)),
    Setting("PXP_DEBUG", "flag", "show the Python trace of an unexpected error instead of its one line",
            "cli", False),
    Setting("PXP_LLM_MAX_RETRIES", "int", "retries of a failed model call; unset: the SDK's", "models", None,
            0, 100),
    Setting("PXP_LLM_TIMEOUT", "float", "seconds a model call may take; unset: the SDK's, 180 for a local server",
            "models", None, 0, 86400, above=True),
    Setting("PXP_LLM_SLOW_AFTER", "float", "seconds before an unanswered call shows as waiting for the model to load",
            "models", 10.0, 0, 86400, above=True),
    Setting("PXP_MAX_IMAGE_PX", "int", "the longest image edge sent to a model; unset: the provider's limit",
            "models", None, 16, 100000),
    Setting("PXP_THINKING_BUDGET", "int", "tokens a Claude model may think before it answers", "models", 0, 1024,
            1_000_000, zero_off=True),
    Setting("PXP_DB_RETRY_S", "float", "seconds a run waits out a lost database before it pauses", "runs", 60.0, 0,
            86400),
    Setting("PXP_N", "int", "the message bound n the app's Settings start from", "app", 10, 2, MAX_MESSAGE_BOUND),
    Setting("PXP_K", "int", "the k the app's Settings start from: REJECT allowed after message k", "app", 3, 1,
            MAX_MESSAGE_BOUND),
    Setting("PXP_MACHINE", "spec", "the machine the app's Settings start from", "app", "simulated", word="simulated"),
    Setting("PXP_CHECKER", "spec", "the checker the app's Settings start from", "app", "lexical", word="lexical"),
    Setting("PXP_BASE_URL", "url", "the OpenAI-compatible server the app's Settings start from", "app"),
    Setting("PXP_DEMO_FILMS", "flag", "whether the app's first start makes the demo films too", "app", True),
    Setting("PXP_WARM", "flag", "whether the app computes the Analytics views' first results in the background "
            "when its database opens and after the data changes", "app", True),
    Setting("PXP_MAX_LOGIN_HOURS", "float", "hours a login lasts before the user logs in again", "app", 12.0, 0,
            720, above=True, sources=(ENV, SECRET)),
    Setting("ANTHROPIC_API_KEY", "key", "the Anthropic key the app uses when the environment has none", "app",
            sources=(SECRET,)),
    Setting("OPENAI_API_KEY", "key", "the OpenAI key the app uses when the environment has none", "app",
            sources=(SECRET,)),
    Setting("auth", "table", "login: redirect_uri, cookie_secret and an OpenID provider", "app", sources=(SECRET,)),
    Setting("connections", "table", "Streamlit's own connections (pxp reads none of it)", "app", sources=(SECRET,)),
)
BY_NAME = {s.name: s for s in DECLARED}
_PASSWORD = re.compile(r"(://[^/:@]*:)[^@/]*@")


def url_error(url: str) -> str | None:
    """Why `url` cannot be a server's base URL (http or https with a host: --base-url, PXP_BASE_URL, a run's
    base_url, Settings), or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError as e:
        return f"not a URL ({e}); give e.g. http://localhost:11434/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url.strip()):
        return "not an http(s) URL with a host; give e.g. http://localhost:11434/v1"
    return None


def shown(setting: Setting, raw: object) -> str:
    """The value as a user may see it: an API key never, a URL's password never, a long value cut."""
    if setting.kind == "key":
        return "(hidden)"
    text = _PASSWORD.sub(r"\1***@", str(raw))
    return repr(text if len(text) <= 80 else text[:79] + "…")


def _refuse(setting: Setting, raw: object, where: str) -> SettingError:
    said = f"{setting.name} ({where})" if where != ENV else setting.name
    if str(raw).strip() == "":
        return SettingError(f"{said} is set but empty: unset it (default {setting.shown_default()}) or give "
                            f"{setting.allowed()}")
    return SettingError(f"{said} is {shown(setting, raw)}: allowed is {setting.allowed()} ({setting.meaning})")


def parse(setting: Setting, raw: object, where: str = ENV) -> Any:
    """The typed value of `raw` (a text, or a TOML value of a secret); SettingError when not allowed."""
    if setting.kind == "table":
        if isinstance(raw, Mapping):
            return raw
        raise _refuse(setting, raw, where)
    text = str(raw).strip() if not isinstance(raw, bool) else ""
    if not text:
        raise _refuse(setting, raw, where)
    if setting.kind == "flag":
        if text.lower() in _FLAGS:
            return _FLAGS[text.lower()]
    elif setting.kind in ("int", "float"):
        return _number(setting, text, raw, where)
    elif setting.kind == "url":
        if url_error(text) is None:
            return text
    elif setting.kind == "database":
        scheme, sep, rest = text.partition("://")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) and rest:
            return text
    elif setting.kind == "spec":
        provider, sep, model = text.partition(":")
        if text == setting.word or (sep and provider.strip().lower() in ("anthropic", "openai") and model.strip()):
            return text
    else:  # a key: any text
        return text
    raise _refuse(setting, raw, where)


def _number(setting: Setting, text: str, raw: object, where: str) -> float | int:
    try:
        number: float | int = int(text) if setting.kind == "int" else float(text)
    except ValueError:
        raise _refuse(setting, raw, where) from None
    if setting.zero_off and number == 0:
        return number
    low, high = setting.low, setting.high
    if not math.isfinite(number) or (low is not None and (number <= low if setting.above else number < low)) \
            or (high is not None and number > high):
        raise _refuse(setting, raw, where)
    return number


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The typed value of an environment variable, its default when unset; SettingError when not allowed."""
    setting = BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name)
    return setting.default if raw is None else parse(setting, raw)


def check(groups: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
    """Refuse the first bad environment variable of the groups a command uses (USES), before it does anything."""
    wanted = set(groups)
    for setting in DECLARED:
        if setting.uses in wanted and ENV in setting.sources:
            value(setting.name, environ)


def problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every bad environment variable, one line each (`pxp doctor`)."""
    out = []
    for setting in DECLARED:
        if ENV in setting.sources:
            try:
                value(setting.name, environ)
            except SettingError as bad:
                out.append(str(bad))
    return out


def check_secrets(values: Mapping[str, Any], where: str) -> None:
    """Refuse the first declared secret with a value not allowed (`where`: the secrets file)."""
    for setting in DECLARED:
        if SECRET in setting.sources and setting.name in values:
            parse(setting, values[setting.name], f"{SECRET} in {where}")


def table() -> str:
    """The Markdown table of every setting (docs/operations.md, Settings, is kept equal to it by a test)."""
    rows = ["| Setting | Where | Allowed | Default | Meaning | Used by |", "|---|---|---|---|---|---|"]
    for s in DECLARED:
        rows.append(f"| `{s.name}` | {', '.join(s.sources)} | {s.allowed()} | {s.shown_default()} | {s.meaning} | "
                    f"{USES[s.uses]} |")
    return "\n".join(rows)


__all__ = ["BY_NAME", "DECLARED", "USES", "Setting", "SettingError", "check", "check_secrets", "parse", "problems",
           "table", "url_error", "value"]
