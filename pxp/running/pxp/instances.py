"""The agent-facing views of instances, cached within a byte budget (DESIGN §3, docs/development.md, Memory budgets).

Instances do not change, so every driver (the engine's step, the runner's pools and LEARN's
evaluation splits) shares one view per instance. The cache was unbounded, so a 10,000-case run
kept every instance; it is now a ByteLRU (pxp.llm.bytecache) of INSTANCE_CACHE_BYTES, each view
sized by `view_nbytes`. A view holds no image: `load_image` reads the asset on demand, and the
prepared image is cached by pxp.llm.images within its own budget.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.agents.base import Answer, InstanceView
from pxp.llm.bytecache import MB, ByteLRU, nbytes
from pxp.running.pxp.errors import StepError
from pxp.storage.tables import Asset, Dataset, Instance

#: byte budget of the instance views: a view is its texts and meta plus ~0.5 KB of objects, so
#: 32 MB holds tens of thousands of typical cases, and fewer only when their payloads are large
INSTANCE_CACHE_BYTES = 32 * MB


def view_nbytes(view: InstanceView) -> int:
    """The memory a cached view holds: its texts and meta (as nbytes sizes them) plus its objects
    (the view, its reference Answer, and the image loader closure with its cells)."""
    texts = (view.key, view.task, view.payload, view.label, view.split, view.asset_sha256,
             view.reference.prediction, view.reference.explanation)
    loader = view.load_image
    cells = getattr(loader, "__closure__", None) or ()
    objects = sys.getsizeof(view) + sys.getsizeof(view.reference) + sys.getsizeof(loader)
    objects += sum(sys.getsizeof(c) for c in cells)
    return objects + sum(nbytes(t) for t in texts) + nbytes(view.meta)


#: the views by (database engine, instance id); an entry keeps its engine alive until evicted
CACHE: ByteLRU[tuple[Engine, int], InstanceView] = ByteLRU(
    INSTANCE_CACHE_BYTES, size=view_nbytes, name="instance views"
)


def _asset_loader(engine: Engine, sha: str | None) -> Callable[[], bytes | None]:
    def load() -> bytes | None:
        if sha is None:
            return None
        with DB(engine) as db:
            asset = db.get(Asset, sha)
            return asset.data if asset is not None else None

    return load


def _read(engine: Engine, instance_id: int, db: DB) -> InstanceView:
    inst = db.get(Instance, instance_id)
    if inst is None:
        raise StepError(f"instance {instance_id} does not exist")
    ds = db.get(Dataset, inst.dataset_id)
    task = ds.task if ds is not None else "text"
    return InstanceView(
        id=instance_id,
        key=inst.key,
        task=task,
        payload=inst.payload,
        label=inst.label,
        reference=Answer(inst.reference_prediction, inst.reference_explanation),
        split=inst.split,
        asset_sha256=inst.asset_sha256,
        meta=dict(inst.meta or {}),
        load_image=_asset_loader(engine, inst.asset_sha256),
    )


def instance_view(engine: Engine, instance_id: int, db: DB | None = None) -> InstanceView:
    """The agent-facing view of an instance (cached: instances do not change)."""
    key = (engine, instance_id)
    view: InstanceView | None = CACHE.get(key)
    if view is not None:
        return view
    if db is not None:
        view = _read(engine, instance_id, db)
    else:
        with DB(engine) as own:
            view = _read(engine, instance_id, own)
    CACHE.put(key, view)
    return view
