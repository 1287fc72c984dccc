"""The configuration of a controlled run (DESIGN §1, §8): what an experiment stores to be repeated exactly.

Both the runner and the agent factory read it; it imports nothing of the running layer.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pxp import __version__
from pxp.protocols.errors import PxpError

#: the defaults `pxp run`, a grid file's [run] and the Experiments page share (docs/research.md, Controlled runs):
#: LEARN on; the agents interact on the train split when the dataset has one, else on every instance
LEARN_DEFAULT = True
DEFAULT_SPLIT = "train"


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
    #: the evaluation schedule (docs/research.md, Evaluation schedules; defaults are the papers': every session, whole
    #: splits)
    eval_every: int = 1
    eval_sample: int | None = None
    learn_sample: int | None = None
    #: which kept sessions are carried into the next prompt: all, last:M or tokens:T
    carry: str = "all"
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
            "eval_every": self.eval_every,
            "eval_sample": self.eval_sample,
            "learn_sample": self.learn_sample,
            "carry": self.carry,
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

    def schedule_errors(self) -> list[str]:
        """Why the evaluation schedule or the carry policy cannot work (one line each)."""
        errs = []
        if not isinstance(self.eval_every, int) or self.eval_every < 1:
            errs.append(f"--eval-every must be at least 1 (got {self.eval_every})")
        for opt, v in (("--eval-sample", self.eval_sample), ("--learn-sample", self.learn_sample)):
            if v is not None and (not isinstance(v, int) or v < 1):
                errs.append(f"{opt} must be at least 1 (got {v})")
        try:
            parse_carry(self.carry)
        except RunError as e:
            errs.append(str(e))
        return errs

    def schedule_text(self) -> str:
        """The schedule in words, e.g. 'after every 25th session on a seeded sample of 50 test cases'."""
        every = ("after every session" if self.eval_every == 1
                 else f"after every {_ordinal(self.eval_every)} session and after the last")
        split = self.test_split or "test"
        on = (f"on a seeded sample of {self.eval_sample} {split} cases" if self.eval_sample
              else f"on the whole {split} split")
        return f"{every} {on}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        keys = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in keys})


def rep_seed(seed: int, repetition: int) -> int:
    """The seed of repetition r, derived from the experiment seed (31 bits: a signed INTEGER column)."""
    digest = hashlib.sha256(f"pxp|{seed}|{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def _ordinal(i: int) -> str:
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


#: a carry policy: ("all", None), ("last", M) or ("tokens", T)
Carry = tuple[str, int | None]


def parse_carry(text: str) -> Carry:
    """`all`, `last:M` or `tokens:T` (M, T positive integers); RunError (one line) otherwise."""
    kind, sep, num = str(text).strip().lower().partition(":")
    if kind == "all" and not sep:
        return "all", None
    if kind in ("last", "tokens") and sep:
        try:
            value = int(num)
        except ValueError:
            value = 0
        if value >= 1:
            return kind, value
    raise RunError(f"--carry must be all, last:M or tokens:T with M, T positive integers (got {text!r})")


def sample_ids(ids: Sequence[int], size: int | None, seed: int, purpose: str) -> list[int]:
    """A fixed, seeded sample of `size` of the instance ids (all of them, in order, when None or larger).

    The same for every repetition, so the repetitions' scores stay comparable; the sample
    is kept in id order.
    """
    ordered = sorted(ids)
    if size is None or size >= len(ordered):
        return ordered
    digest = hashlib.sha256(f"pxp|sample|{purpose}|{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return sorted(rng.sample(ordered, size))
