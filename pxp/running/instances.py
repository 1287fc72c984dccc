"""The agent-facing view of an instance (DESIGN §3): what every step and evaluation shows an agent.

Cached per engine: instances do not change once imported. Images load lazily from their Asset.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.agents.base import Answer, InstanceView
from pxp.protocols.errors import PxpError
from pxp.storage.tables import Asset, Dataset, Instance


class InstanceMissing(PxpError, RuntimeError):
    """A step names an instance that is not in the database."""


_instance_cache: weakref.WeakKeyDictionary[Engine, dict[int, InstanceView]] = weakref.WeakKeyDictionary()


def _asset_loader(engine: Engine, sha: str | None) -> Any:
    def load() -> bytes | None:
        if sha is None:
            return None
        with DB(engine) as db:
            asset = db.get(Asset, sha)
            return asset.data if asset is not None else None

    return load


def instance_view(engine: Engine, instance_id: int, db: DB | None = None) -> InstanceView:
    """The agent-facing view of an instance (cached: instances do not change)."""
    cache = _instance_cache.setdefault(engine, {})
    view = cache.get(instance_id)
    if view is not None:
        return view
    own = db is None
    db = db or DB(engine)
    try:
        inst = db.get(Instance, instance_id)
        if inst is None:
            raise InstanceMissing(f"instance {instance_id} does not exist")
        ds = db.get(Dataset, inst.dataset_id)
        task = ds.task if ds is not None else "text"
        view = InstanceView(
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
    finally:
        if own:
            db.close()
    cache[instance_id] = view
    return view
