"""pxp's one cache: a least-recently-used map bounded by bytes, not entries (docs/development.md, Memory budgets).

A real X-ray display image is megabytes, so a cache of "128 entries" can hold hundreds of
megabytes; every cache of pxp is a ByteLRU with a byte budget instead: the app's drawings and
machines, the prepared LLM images (pxp.llm.images) and the engine's instances
(pxp.running.pxp.instances). It lives in the llm layer, the lowest that uses it.

Values are sized by `nbytes` (bytes and str by length, containers by their items) or by the
`size` function given; a value larger than the whole budget is returned but not kept.
Thread-safe: Streamlit runs each browser session's script in its own thread and the runner
steps sessions in threads; a cache is shared by every thread of the process. Eviction is plain
LRU (least recently used first).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, cast

from pxp.protocols.errors import PxpError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

MB = 1 << 20
_MISSING = object()


def nbytes(value: object) -> int:
    """An estimate of the memory a cached value holds: payload bytes plus a small overhead."""
    if value is None or isinstance(value, (bool, int, float)):
        return 16
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) + 33
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass")) + 49
    if isinstance(value, Mapping):
        return 64 + sum(nbytes(k) + nbytes(v) for k, v in value.items())
    if isinstance(value, (tuple, list, set, frozenset)):
        return 56 + sum(nbytes(v) for v in value)
    return sys.getsizeof(value)


class CacheError(PxpError, ValueError):
    """A cache that cannot be made (a budget that is not positive)."""


class ByteLRU(Generic[K, V]):
    """A least-recently-used cache holding at most `max_bytes` of values (as sized by `size`)."""

    def __init__(self, max_bytes: int, *, size: Callable[[V], int] = nbytes, name: str = "cache") -> None:
        if max_bytes <= 0:
            raise CacheError(f"{name}: the byte budget must be positive, not {max_bytes}")
        self.max_bytes = max_bytes
        self.name = name
        self._size = size
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def nbytes(self) -> int:
        """The bytes the cached values hold now (never more than max_bytes)."""
        return self._bytes

    def get(self, key: K, default: Any = None) -> Any:
        """The value for `key` (now the most recently used), else `default`."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return default
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V) -> None:
        """Keep `value`, evicting the least recently used values until it fits the budget."""
        cost = max(int(self._size(value)), 1)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if cost > self.max_bytes:
                return  # larger than the whole cache: not kept
            while self._items and self._bytes + cost > self.max_bytes:
                _, (_, freed) = self._items.popitem(last=False)
                self._bytes -= freed
            self._items[key] = (value, cost)
            self._bytes += cost

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The cached value, else `make()` (kept if it fits). Exceptions are not cached."""
        hit = self.get(key, _MISSING)
        if hit is not _MISSING:
            return cast(V, hit)
        value = make()
        self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def byte_cached(max_bytes: int, *, size: Callable[[Any], int] = nbytes) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function of hashable arguments with its own ByteLRU (as `.cache`)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        cache: ByteLRU[Hashable, R] = ByteLRU(max_bytes, size=size, name=fn.__qualname__)

        @functools.wraps(fn)
        def cached(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (args, tuple(sorted(kwargs.items())))
            return cache.get_or_make(key, lambda: fn(*args, **kwargs))

        cached.cache = cache  # type: ignore[attr-defined]  # a function attribute, as functools.lru_cache's
        return cached

    return wrap


def cache_of(fn: Callable[..., Any]) -> ByteLRU[Any, Any]:
    """The ByteLRU behind a function decorated with byte_cached (to inspect or clear it)."""
    cache = getattr(fn, "cache", None)
    if not isinstance(cache, ByteLRU):
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} is not byte_cached")
    return cache
