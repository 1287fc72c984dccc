"""A concurrency limit shared by every LLM call in the process (controlled runs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_slots = threading.BoundedSemaphore(4)
_size = 4


def set_call_limit(size: int) -> None:
    """Allow at most `size` LLM calls at once (replaces the current limit)."""
    global _slots, _size
    with _lock:
        _size = max(1, int(size))
        _slots = threading.BoundedSemaphore(_size)


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
