"""The TaskSpec of a dataset: RAD, DRUG, or the custom config stored with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pxp.tasks.base import task_match_kind
from pxp.tasks.drug import drug_spec
from pxp.tasks.rad import rad_spec
from pxp.tasks.spec import TaskSpec


def task_spec(task: str, config: Mapping[str, Any] | None = None,
              labels: Sequence[str] = ()) -> TaskSpec:
    """The spec for a dataset's task and config (config["task_config"] wins).

    `labels` are the dataset's reference predictions, used by RAD when the config
    names no labels.
    """
    config = config or {}
    custom = config.get("task_config")
    if isinstance(custom, Mapping):
        from pxp.tasks.custom import task_config  # pydantic: only for a custom task (docs/development.md, "Start-up")

        return task_config(custom).spec()
    if task == "rad":
        return rad_spec(config, labels)
    if task == "drug":
        return drug_spec(config)
    return TaskSpec(name=task or "text", match_kind="text", agree_kind="lexical")


def dataset_match_kind(task: str, config: Mapping[str, Any] | None = None) -> str:
    """The MATCH kind of a dataset's task (its custom config's, when it has a usable one)."""
    try:
        return task_spec(task, config).match_kind
    except ValueError:
        return task_match_kind(task, dict(config or {}))
