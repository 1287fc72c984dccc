"""The stored identity of a named row (docs/development.md "The text rule"): the UTS #39 skeleton
of its name, set on insert, under a unique index, so two look-alike names (a dataset, an
experiment, a team member of one kind) are one even when both are written at the same moment."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine.default import DefaultExecutionContext

from pxp.protocols.text import skeleton


def stored_identity(context: DefaultExecutionContext) -> str:
    """The `identity` column's default: the skeleton of the row's name, computed as the row is inserted."""
    return skeleton(context.get_current_parameters()["name"])  # type: ignore[no-untyped-call]


#: the column arguments of an `identity` field (a String(1000))
IDENTITY: dict[str, Any] = {"default": stored_identity}
