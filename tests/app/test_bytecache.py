"""The app's byte-bounded caches (docs/development.md, Memory budgets): the real display-image and molecule caches of
pxp.app.ui staying within their budgets, and the native heap bound (ByteLRU itself:
tests/llm/test_bytecache.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.app import bound_native_heap, resources, ui
from pxp.llm.bytecache import MB, cache_of, nbytes
from pxp.storage.store import get_engine
from pxp.storage.tables import Instance
from tests.factories import DRUGS, make_rad_images

KB = 1024


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
