"""The checks a controlled run's configuration passes before anything is stored.

DESIGN §1 bounds (n at least 2, 1 <= k <= n), the agents the config names, and the ranges
of the options. One list of problems serves the CLI (pxp.running.pxp.experiments.create_experiment
calls check_config first) and the app (the Experiments page shows config_errors before launch,
and never offers Resume for a stored config that has any).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pxp.protocols.pxp.rules import MAX_MESSAGE_BOUND
from pxp.protocols.settings import url_error

if TYPE_CHECKING:
    from pxp.running.pxp.config import RunConfig

_PROBABILITIES = ("accuracy", "adopt", "mislead")


def _role_error(role: str, spec: str, plain: str) -> str | None:
    """Why `spec` cannot name the role's agent (`plain`, or provider:model), or None."""
    from pxp.llm.base import LLMConfigError, is_llm_spec, parse_spec

    if spec == plain:
        return None
    if not is_llm_spec(spec):
        return f"{role} {spec!r} is not available; use {plain}, anthropic:<model> or openai:<model>"
    try:
        parse_spec(spec)
    except LLMConfigError as e:
        return f"{role}: {e}"
    return None


def config_errors(cfg: RunConfig | Mapping[str, Any]) -> list[str]:
    """Every reason the run configuration cannot start (a RunConfig or its as_dict()); empty if it can."""
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.evaluate import METRIC_NAMES

    if not isinstance(cfg, RunConfig):
        try:
            cfg = RunConfig.from_dict(cfg)
        except TypeError as e:
            return [f"the stored configuration is incomplete ({e})"]
    errs = [e for e in (_role_error("machine", cfg.machine, "simulated"),
                        _role_error("checker", cfg.checker, "lexical")) if e]
    if not isinstance(cfg.n, int) or cfg.n < 2:
        errs.append(f"--n must be at least 2 (got {cfg.n})")
    elif cfg.n > MAX_MESSAGE_BOUND:
        errs.append(f"--n must be at most {MAX_MESSAGE_BOUND}, the largest message bound pxp stores (got {cfg.n})")
    if not isinstance(cfg.k, int) or cfg.k < 1:
        errs.append(f"--k must be at least 1 (got {cfg.k})")
    elif isinstance(cfg.n, int) and cfg.k > cfg.n:
        errs.append(f"--k ({cfg.k}) must not be greater than --n ({cfg.n})")
    if not isinstance(cfg.reps, int) or cfg.reps < 1:
        errs.append("--reps must be at least 1")
    if cfg.concurrency < 1:
        errs.append("--concurrency must be at least 1")
    if cfg.learn_metric not in METRIC_NAMES:
        errs.append(f"learn_metric must be one of {', '.join(METRIC_NAMES)}")
    if cfg.human != "proxy":
        errs.append(f"human {cfg.human!r} cannot drive a controlled run; use --human proxy")
    for key in _PROBABILITIES:
        v = cfg.simulated.get(key)
        if v is not None and not 0.0 <= float(v) <= 1.0:
            errs.append(f"--sim-{key} must be between 0 and 1 (got {v})")
    if float(cfg.simulated.get("latency", 0.0)) < 0:
        errs.append(f"--sim-latency must not be negative (got {cfg.simulated['latency']})")
    if not 0.0 <= cfg.agree_threshold <= 1.0:
        errs.append(f"agree_threshold must be between 0 and 1 (got {cfg.agree_threshold})")
    if cfg.temperature is not None and cfg.temperature < 0:
        errs.append(f"--temperature must not be negative (got {cfg.temperature})")
    if cfg.max_tokens is not None and cfg.max_tokens < 1:
        errs.append(f"--max-tokens must be at least 1 (got {cfg.max_tokens})")
    if cfg.base_url is not None and (why := url_error(cfg.base_url)) is not None:
        errs.append(f"--base-url {cfg.base_url!r}: {why}")
    errs += cfg.schedule_errors()
    return errs


def check_config(cfg: RunConfig) -> None:
    """Refuse a config that cannot run (its first problem, as one line) before anything is stored.

    The dataset and its splits are checked by create_experiment, also before storing.
    """
    from pxp.running.pxp.config import RunError

    errs = config_errors(cfg)
    if errs:
        raise RunError(errs[0])
