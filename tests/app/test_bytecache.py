"""The app's byte-bounded LRU (issue 13 §4): budgets in bytes, LRU eviction, and the real
display-image and molecule caches of pxp.app.ui staying within their budgets."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app import resources, ui
from pxp.app.bytecache import MB, ByteLRU, bound_native_heap, byte_cached, cache_of, nbytes
from pxp.storage.store import get_engine
from pxp.storage.tables import Instance
from tests.factories import DRUGS, make_rad_images

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


def test_the_display_image_cache_stays_within_its_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real X-ray display PNGs (2400×2000 sources) through ui.display_png: at most the budget."""
    engine = get_engine(f"sqlite:///{tmp_path / 'img.db'}")
    make_rad_images(engine, per_label=2)
    with DB(engine) as db:
        ids = [int(i.id) for i in db.exec(select(Instance)).all() if i.id is not None]
    cache = cache_of(ui._display_png)
    cache.clear()
    one = ui.display_png(engine, ids[0])
    assert one is not None and len(one) > 10 * KB
    budget = 3 * nbytes(one)
    monkeypatch.setattr(cache, "max_bytes", budget)
    for iid in ids:
        for window in (None, 100.0, 200.0):
            assert ui.display_png(engine, iid, window=window, level=128.0 if window else None)
    assert 0 < cache.nbytes <= budget
    assert len(cache) <= 3
    assert ui.display_png(engine, ids[-1], window=200.0, level=128.0) is cache.get(
        ((str(engine.url.render_as_string(hide_password=False)), ids[-1], 200.0, 128.0), ()))
    cache.clear()


def test_the_drawing_and_machine_caches_have_byte_budgets() -> None:
    svg, props = ui._molecule(DRUGS[0][0], 420, 294)
    assert svg.startswith("<?xml") and props["formula"]
    fns: list[tuple[Callable[..., Any], int]] = [
        (ui._molecule, ui.MOLECULE_BYTES), (ui._reaction, ui.REACTION_BYTES),
        (ui._display_png, ui.DISPLAY_PNG_BYTES), (resources._machine, resources.MACHINE_BYTES)]
    for fn, budget in fns:
        cache = cache_of(fn)
        assert cache.max_bytes == budget
        assert cache.nbytes <= budget
    assert cache_of(ui._molecule).nbytes >= len(svg)
    with pytest.raises(TypeError, match="not byte_cached"):
        cache_of(nbytes)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_the_native_heap_bound_applies_on_glibc() -> None:
    assert bound_native_heap() is True
    big = [bytes(4 * MB) for _ in range(4)]  # above the fixed mmap threshold: mapped, then unmapped
    assert sum(map(len, big)) == 16 * MB
