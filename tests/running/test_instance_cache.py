"""The engine's instance views are cached within a byte budget, not kept forever (docs/development.md, Memory budgets):
real instances from a real database (SQLite and PostgreSQL) through pxp.running.pxp.instances."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from pxp.agents.base import InstanceView
from pxp.llm.bytecache import MB
from pxp.running.pxp import engine as engine_module
from pxp.running.pxp.instances import CACHE, INSTANCE_CACHE_BYTES, instance_view, view_nbytes
from pxp.storage.store import db_session, get_engine
from pxp.storage.tables import Asset, Dataset, Instance
from tests.factories import make_rad_images


def _cases(engine: Engine, count: int, name: str = "cases") -> list[int]:
    """`count` text instances of varied sizes (payloads of 100 B to 4 KB, some meta); their ids."""
    with db_session(engine) as db:
        ds = Dataset(name=name, task="text")
        db.add(ds)
        db.flush()
        rows = [
            Instance(
                dataset_id=ds.id or 0, key=f"{name}_{o}", ordinal=o, split=("train", "val", "test")[o % 3],
                payload=f"Case {o} of {name}: " + "findings " * (10 + (o * 37) % 450), label=f"label {o % 5}",
                reference_prediction=f"label {o % 5}", reference_explanation=f"Because of case {o}. " * (1 + o % 20),
                meta={"source": name, "ordinal": o, "tags": [f"t{o % 7}", "x"]} if o % 2 else {},
            )
            for o in range(1, count + 1)
        ]
        db.add_all(rows)
        db.flush()
        return [r.id or 0 for r in rows]


@pytest.fixture
def cache() -> Iterator[None]:
    CACHE.clear()
    yield
    CACHE.clear()


def _same_as_stored(engine: Engine, view: InstanceView) -> None:
    with db_session(engine) as db:
        inst = db.get(Instance, view.id)
        assert inst is not None
        ds = db.get(Dataset, inst.dataset_id)
        assert ds is not None
        asset = db.get(Asset, inst.asset_sha256) if inst.asset_sha256 else None
        assert (view.key, view.task, view.payload, view.label, view.split, view.asset_sha256, view.meta) == (
            inst.key, ds.task, inst.payload, inst.label, inst.split, inst.asset_sha256, dict(inst.meta or {}))
        assert (view.reference.prediction, view.reference.explanation) == (
            inst.reference_prediction, inst.reference_explanation)
        assert view.load_image() == (asset.data if asset is not None else None)


def test_the_default_budget_is_bytes_and_the_engine_uses_this_cache() -> None:
    assert CACHE.max_bytes == INSTANCE_CACHE_BYTES == 32 * MB
    assert engine_module.instance_view is instance_view


def test_filled_past_its_budget_the_cache_stays_under_it_and_evicts_least_recently_used(
    any_engine: Engine, cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _cases(any_engine, 60)
    sizes = {i: view_nbytes(instance_view(any_engine, i)) for i in ids}
    CACHE.clear()
    budget = sum(sizes[i] for i in ids[:10])  # about ten of the sixty
    monkeypatch.setattr(CACHE, "max_bytes", budget)
    first = instance_view(any_engine, ids[0])
    for i in ids[1:]:
        view = instance_view(any_engine, i)
        assert view.id == i
        assert 0 < CACHE.nbytes <= budget
        assert instance_view(any_engine, ids[0]) is first  # used at every step: never the least recent
    assert 5 < len(CACHE) < 20
    assert (any_engine, ids[0]) in CACHE and (any_engine, ids[-1]) in CACHE
    assert (any_engine, ids[1]) not in CACHE  # the least recently used went first
    kept = [i for i in ids if (any_engine, i) in CACHE]
    assert kept == [ids[0], *ids[-(len(kept) - 1):]]  # the most recent ones, in order
    assert CACHE.nbytes == sum(sizes[i] for i in kept)
    # an evicted instance is read again, with its stored values
    again = instance_view(any_engine, ids[1])
    _same_as_stored(any_engine, again)
    assert instance_view(any_engine, ids[1]) is again


def test_views_are_the_stored_instances_with_their_images_per_database(tmp_path: Path, cache: None) -> None:
    """Two databases with the same instance ids: each engine gets its own views (and images)."""
    a = get_engine(f"sqlite:///{tmp_path / 'a.db'}")
    b = get_engine(f"sqlite:///{tmp_path / 'b.db'}")
    make_rad_images(a, per_label=1, size=(300, 200))
    _cases(b, 5, name="other")
    with db_session(a) as db:
        ids = [i.id or 0 for i in db.exec(select(Instance)).all()]
    for i in ids:
        va, vb = instance_view(a, i), instance_view(b, i)
        assert va.key != vb.key and va.task == "rad" and vb.task == "text"
        _same_as_stored(a, va)
        _same_as_stored(b, vb)
        data = va.load_image()
        assert data is not None and data.startswith(b"\x89PNG")


def test_the_size_estimate_is_the_memory_a_view_holds(any_engine: Engine, cache: None) -> None:
    """view_nbytes against tracemalloc: what 300 cached views keep allocated, within ±25 %."""
    ids = _cases(any_engine, 300)
    instance_view(any_engine, ids[0])  # the first read's one-off allocations (statements, types)
    CACHE.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        views = [instance_view(any_engine, i) for i in ids]
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    held = sum(s.size_diff for s in after.compare_to(before, "filename"))
    held -= len(views) * 150  # the cache's own entry (key tuple, size tuple, dict slot) and the list
    estimated = sum(view_nbytes(v) for v in views)
    assert estimated == CACHE.nbytes
    assert 0.75 * held <= estimated <= 1.25 * held, (estimated, held)
