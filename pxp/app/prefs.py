"""App preferences in the AppSetting table (Settings page): never API keys."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.protocols.errors import PxpError
from pxp.protocols.settings import url_error
from pxp.storage.settings import get_settings
from pxp.storage.tables import AppSetting, utcnow

KEY_NAMES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


class PrefsError(PxpError, ValueError):
    """A preference that cannot be saved; the first problem, one line."""


@dataclass(frozen=True)
class Prefs:
    """Provider/model per role (DESIGN §5), base URL and the defaults for n and k."""

    generator: str = "simulated"
    checker: str = "lexical"
    base_url: str = ""
    generator_temperature: float = 0.0
    generator_max_tokens: int = 0
    n: int = 10
    k: int = 3


def _defaults() -> Prefs:
    s = get_settings()
    return Prefs(generator=s.machine, checker=s.checker, base_url=s.base_url or "", n=s.n, k=s.k)


def load_prefs(engine: Engine) -> Prefs:
    """Stored preferences over the environment's defaults (PXP_MACHINE, PXP_N, ...)."""
    base = asdict(_defaults())
    with DB(engine) as db:
        for row in db.exec(select(AppSetting)).all():
            if row.key in base and row.value is not None:
                base[row.key] = row.value
    try:
        return Prefs(**base)
    except TypeError:
        return _defaults()


def check_prefs(p: Prefs) -> list[str]:
    """Problems with preferences, one line each (empty when they can be saved)."""
    problems = []
    if p.n < 2:
        problems.append("n (messages per session) must be at least 2")
    if p.k < 1:
        problems.append("k must be at least 1")
    for role, spec in (("generator", p.generator), ("checker", p.checker)):
        if spec in ("simulated", "lexical"):
            continue
        if ":" not in spec or not spec.split(":", 1)[1].strip():
            problems.append(f"{role}: write provider:model, e.g. anthropic:claude-sonnet-4-6")
    if p.base_url and url_error(p.base_url) is not None:
        problems.append(f"the base URL {p.base_url!r}: {url_error(p.base_url)}")
    return problems


def save_prefs(engine: Engine, p: Prefs) -> None:
    """Store the preferences (one row per key); ValueError with the first problem."""
    problems = check_prefs(p)
    if problems:
        raise PrefsError(problems[0])
    values: dict[str, Any] = asdict(p)
    with DB(engine) as db:
        for key, value in values.items():
            row = db.get(AppSetting, key)
            if row is None:
                row = AppSetting(key=key, value=value)
            else:
                row.value = value
                row.updated_at = utcnow()
            db.add(row)
        db.commit()
