"""pxp's byte-bounded LRU (docs/development.md, Memory budgets): budgets in bytes, LRU eviction, thread safety."""

from __future__ import annotations

import threading

import pytest

from pxp.llm.bytecache import MB, ByteLRU, byte_cached, nbytes

KB = 1024


def test_values_are_evicted_by_bytes_least_recently_used_first() -> None:
    cache: ByteLRU[str, bytes] = ByteLRU(10 * KB)
    cache.put("a", b"a" * (4 * KB))
    cache.put("b", b"b" * (4 * KB))
    assert cache.get("a") is not None  # "a" is now the most recently used
    cache.put("c", b"c" * (4 * KB))  # 12 KB > 10 KB: "b" goes, not "a"
    assert "b" not in cache
    assert "a" in cache and "c" in cache
    assert cache.nbytes <= 10 * KB
    assert cache.nbytes == nbytes(b"a" * (4 * KB)) + nbytes(b"c" * (4 * KB))


def test_many_small_entries_fit_where_one_large_one_evicts_them() -> None:
    cache: ByteLRU[int, bytes] = ByteLRU(1 * MB)
    for i in range(1000):
        cache.put(i, bytes(100))
    assert len(cache) == 1000  # an entry-count bound of 128 would have dropped most of them
    cache.put(-1, bytes(MB - 1000))
    assert cache.nbytes <= MB
    assert len(cache) < 100


def test_a_value_larger_than_the_budget_is_returned_but_not_kept() -> None:
    cache: ByteLRU[str, bytes] = ByteLRU(1 * KB)
    cache.put("small", b"x")
    big = cache.get_or_make("big", lambda: bytes(2 * KB))
    assert len(big) == 2 * KB
    assert "big" not in cache and "small" in cache


def test_replacing_a_key_does_not_count_it_twice() -> None:
    cache: ByteLRU[str, bytes] = ByteLRU(10 * KB)
    for _ in range(50):
        cache.put("k", bytes(4 * KB))
    assert len(cache) == 1 and cache.nbytes == nbytes(bytes(4 * KB))


def test_none_is_cached_and_exceptions_are_not() -> None:
    calls: list[int] = []

    @byte_cached(1 * MB)
    def nothing(x: int) -> None:
        calls.append(x)

    @byte_cached(1 * MB)
    def fails(x: int) -> int:
        calls.append(x)
        raise ValueError("bad")

    nothing(1)
    nothing(1)
    assert calls == [1]
    for _ in range(2):
        with pytest.raises(ValueError):
            fails(2)
    assert calls == [1, 2, 2]


def test_a_bad_budget_is_one_line() -> None:
    with pytest.raises(ValueError, match="budget must be positive"):
        ByteLRU(0, name="images")


def test_concurrent_puts_keep_the_byte_count_exact() -> None:
    cache: ByteLRU[int, bytes] = ByteLRU(64 * KB)

    def work(base: int) -> None:
        for i in range(500):
            cache.put(base + i % 40, bytes(1 + (i * 37) % (4 * KB)))
            cache.get(base + (i * 7) % 40)

    threads = [threading.Thread(target=work, args=(t * 100,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.nbytes <= 64 * KB
    assert cache.nbytes == sum(nbytes(cache.get(k)) for k in list(cache._items))
