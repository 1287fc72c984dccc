"""Concurrency limits of LLM calls: one shared by every call in the process (controlled runs), and an
adaptive in-flight limit per provider.

On HTTP 429 (after the SDK's own retries) the provider's limit halves and the call is sent again
once a slot is free; every `RECOVER_AFTER` successes give one slot back, up to the shared limit.
A 429 on a call sent while the provider's limit was already 1 is raised: the run pauses then, not
at the first 429.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

_lock = threading.Lock()
_slots = threading.BoundedSemaphore(4)
_size = 4

#: successes that give a throttled provider one slot back
RECOVER_AFTER = 10
#: seconds to wait before sending a rate-limited call again (the SDK has already backed off)
RETRY_PAUSE = 1.0


def set_call_limit(size: int) -> None:
    """Allow at most `size` LLM calls at once (replaces the current limit and resets every provider's)."""
    global _slots, _size
    with _lock:
        _size = max(1, int(size))
        _slots = threading.BoundedSemaphore(_size)
        for p in _providers.values():
            p.reset(_size)


def call_limit() -> int:
    return _size


@contextmanager
def call_slot() -> Iterator[None]:
    """Hold one of the shared call slots for the duration of one LLM call."""
    slots = _slots
    slots.acquire()
    try:
        yield
    finally:
        slots.release()


@dataclass(frozen=True)
class LimitState:
    """A provider's limit as seen from outside: now, its ceiling, calls in flight, halvings so far."""

    limit: int
    ceiling: int
    in_flight: int
    halvings: int


class AdaptiveLimit:
    """The in-flight limit of one provider: halves on HTTP 429, +1 per `recover_after` successes."""

    def __init__(self, name: str, ceiling: int, *, recover_after: int | None = None) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._recover_after = recover_after
        self.in_flight = 0
        self.reset(ceiling)

    def reset(self, ceiling: int) -> None:
        """A new ceiling, and the limit back at it (calls in flight stay counted)."""
        with self._cond:
            self.ceiling = self.limit = max(1, int(ceiling))
            self.successes = self.halvings = 0
            self._generation = 0
            self._cond.notify_all()

    def state(self) -> LimitState:
        with self._cond:
            return LimitState(self.limit, self.ceiling, self.in_flight, self.halvings)

    def _acquire(self) -> tuple[int, int]:
        with self._cond:
            while self.in_flight >= self.limit:
                self._cond.wait()
            self.in_flight += 1
            return self._generation, self.limit

    def _release(self, *, ok: bool) -> None:
        with self._cond:
            self.in_flight -= 1
            if ok and self.limit < self.ceiling:
                self.successes += 1
                if self.successes >= (self._recover_after or RECOVER_AFTER):
                    self.limit += 1
                    self.successes = 0
            self._cond.notify_all()

    def _throttle(self, generation: int) -> None:
        """Halve the limit once per burst of 429s (calls sent before the last halving do not halve again)."""
        with self._cond:
            self.in_flight -= 1
            if generation == self._generation and self.limit > 1:
                before, self.limit = self.limit, max(1, self.limit // 2)
                self._generation += 1
                self.halvings += 1
                self.successes = 0
                log.warning("%s: rate limited (HTTP 429); calls in flight limited to %d (was %d)",
                            self.name, self.limit, before)
            self._cond.notify_all()

    def call(self, send: Callable[[], T], rate_limited: Callable[[Exception], bool]) -> T:
        """`send()` within the limit; a rate-limited failure lowers the limit and sends again,
        unless it was sent at limit 1, when it is raised."""
        while True:
            generation, limit = self._acquire()
            try:
                out = send()
            except Exception as e:
                if not rate_limited(e):
                    self._release(ok=False)
                    raise
                self._throttle(generation)
                if limit <= 1:
                    raise
                if RETRY_PAUSE > 0:
                    time.sleep(RETRY_PAUSE)
                continue
            except BaseException:
                self._release(ok=False)
                raise
            self._release(ok=True)
            return out


_providers: dict[str, AdaptiveLimit] = {}


def provider_limit(key: str) -> AdaptiveLimit:
    """The adaptive limit of one provider endpoint (e.g. `anthropic`, `openai@http://host/v1`)."""
    with _lock:
        limit = _providers.get(key)
        if limit is None:
            limit = _providers[key] = AdaptiveLimit(key, _size)
        return limit


def is_rate_limited(e: Exception) -> bool:
    """Whether an SDK error is HTTP 429 (both SDKs set `status_code`)."""
    return getattr(e, "status_code", None) == 429
