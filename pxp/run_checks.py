"""The checks a controlled run's configuration passes before anything is stored (issue 11 §6, 15 §4).

DESIGN §1 bounds (n at least 2, 1 <= k <= n), the agents the config names, and the ranges
of the options; pxp.runner.create_experiment calls check_config first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pxp.runner import RunConfig

_PROBABILITIES = ("accuracy", "adopt", "mislead")


def check_config(cfg: RunConfig) -> None:
    """Refuse a config that cannot run (DESIGN §1 bounds, agents, options) before anything is stored.

    The dataset and its splits are checked by create_experiment, also before storing.
    """
    from pxp.evaluate import METRIC_NAMES
    from pxp.llm.base import LLMConfigError, is_llm_spec, parse_spec
    from pxp.runner import RunError

    if cfg.n < 2:
        raise RunError(f"--n must be at least 2 (got {cfg.n})")
    if cfg.k < 1:
        raise RunError(f"--k must be at least 1 (got {cfg.k})")
    if cfg.k > cfg.n:
        raise RunError(f"--k ({cfg.k}) must not be greater than --n ({cfg.n})")
    if cfg.reps < 1:
        raise RunError("--reps must be at least 1")
    if cfg.concurrency < 1:
        raise RunError("--concurrency must be at least 1")
    if cfg.learn_metric not in METRIC_NAMES:
        raise RunError(f"learn_metric must be one of {', '.join(METRIC_NAMES)}")
    if cfg.human != "proxy":
        raise RunError(f"human {cfg.human!r} cannot drive a controlled run; use --human proxy")
    for role, spec, plain in (("machine", cfg.machine, "simulated"), ("checker", cfg.checker, "lexical")):
        if spec == plain:
            continue
        if not is_llm_spec(spec):
            raise RunError(f"{role} {spec!r} is not available; use {plain}, anthropic:<model> or openai:<model>")
        try:
            parse_spec(spec)
        except LLMConfigError as e:
            raise RunError(f"{role}: {e}") from None
    for key in _PROBABILITIES:
        v = cfg.simulated.get(key)
        if v is not None and not 0.0 <= float(v) <= 1.0:
            raise RunError(f"--sim-{key} must be between 0 and 1 (got {v})")
    if float(cfg.simulated.get("latency", 0.0)) < 0:
        raise RunError(f"--sim-latency must not be negative (got {cfg.simulated['latency']})")
    if not 0.0 <= cfg.agree_threshold <= 1.0:
        raise RunError(f"agree_threshold must be between 0 and 1 (got {cfg.agree_threshold})")
    if cfg.temperature is not None and cfg.temperature < 0:
        raise RunError(f"--temperature must not be negative (got {cfg.temperature})")
    if cfg.max_tokens is not None and cfg.max_tokens < 1:
        raise RunError(f"--max-tokens must be at least 1 (got {cfg.max_tokens})")
