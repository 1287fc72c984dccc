"""Check a run configuration before anything is stored (shared by the app and the CLI).

A configuration error (an unknown machine or checker, n/k/R out of range) can never be
fixed by resuming; it is refused before the experiment row exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pxp.llm.base import PROVIDERS, LLMConfigError, parse_spec


def role_error(spec: str, *, role: str, plain: str) -> str | None:
    """Why `spec` cannot name the role's agent (`plain`, or provider:model), or None."""
    if spec == plain:
        return None
    try:
        provider, _ = parse_spec(spec)
    except LLMConfigError as e:
        return f"{role}: {e}"
    if provider.lower() not in PROVIDERS:
        return f"{role}: unknown provider {provider!r} in {spec!r} (use {plain}, or {' or '.join(PROVIDERS)}:model)"
    return None


def config_errors(cfg: Mapping[str, Any]) -> list[str]:
    """Every reason the run configuration `cfg` (RunConfig.as_dict()) cannot start; empty if it can."""
    errs = [
        e for e in (
            role_error(str(cfg.get("machine", "")), role="machine", plain="simulated"),
            role_error(str(cfg.get("checker", "")), role="checker", plain="lexical"),
        ) if e
    ]
    for key, label in (("n", "n"), ("k", "k"), ("reps", "R (repetitions)")):
        v = cfg.get(key, 1)
        if not isinstance(v, int) or v < 1:
            errs.append(f"{label} must be a whole number of at least 1")
    return errs
