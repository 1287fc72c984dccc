"""The configuration of a controlled run (DESIGN §1, §8): what an experiment stores to be repeated exactly.

Both the runner and the agent factory read it; it imports nothing of the running layer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pxp import __version__
from pxp.protocols.errors import PxpError


class RunError(PxpError, RuntimeError):
    """A controlled run that cannot start (unknown dataset, bad config)."""


@dataclass
class RunConfig:
    """The full configuration stored with an experiment (enough to repeat it exactly).

    `split` is the split the agents interact on (None: every instance); `val_split`
    is LEARN's validation set and `test_split` the machine-performance set (None: none).
    `learn_metric` is the accuracy LEARN compares: prediction, explanation or both.
    """

    dataset: str
    split: str | None = None
    val_split: str | None = "val"
    test_split: str | None = "test"
    machine: str = "simulated"
    human: str = "proxy"
    checker: str = "lexical"
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    checker_temperature: float = 0.0
    checker_max_tokens: int = 10
    concurrency: int = 4
    eval_at_start: bool = False
    reps: int = 1
    n: int = 10
    k: int = 3
    seed: int = 0
    shuffle: bool = False
    learn: bool = False
    learn_metric: str = "both"
    simulated: dict[str, float] = field(default_factory=dict)
    agree_threshold: float = 0.5
    probe: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dataset": self.dataset,
            "split": self.split,
            "val_split": self.val_split,
            "test_split": self.test_split,
            "machine": self.machine,
            "human": self.human,
            "checker": self.checker,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "checker_temperature": self.checker_temperature,
            "checker_max_tokens": self.checker_max_tokens,
            "concurrency": self.concurrency,
            "eval_at_start": self.eval_at_start,
            "reps": self.reps,
            "n": self.n,
            "k": self.k,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "learn": self.learn,
            "learn_metric": self.learn_metric,
            "simulated": dict(self.simulated),
            "agree_threshold": self.agree_threshold,
            "probe": self.probe,
            "extra": dict(self.extra),
        }
        # derived, for people reading the stored config (ignored by from_dict)
        d["roles"] = {
            "generator": {
                "agent": self.machine,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "base_url": self.base_url,
                **({"simulated": dict(self.simulated)} if self.machine == "simulated" else {}),
            },
            "checker": {
                "agree": self.checker,
                "temperature": self.checker_temperature,
                "max_tokens": self.checker_max_tokens,
                **({"threshold": self.agree_threshold} if self.checker == "lexical" else {}),
            },
            "human": self.human,
        }
        d["pxp_version"] = __version__
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        keys = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in keys})


def rep_seed(seed: int, repetition: int) -> int:
    """The seed of repetition r, derived from the experiment seed (31 bits: a signed INTEGER column)."""
    digest = hashlib.sha256(f"pxp|{seed}|{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1
