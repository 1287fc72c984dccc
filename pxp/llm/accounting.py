"""Totals of the LLMCall rows per run (DESIGN §5, accounting): `pxp calls`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Table, case, func, select

from pxp.models import LLMCall, Run

_L: Table = LLMCall.__table__  # type: ignore[attr-defined]
_R: Table = Run.__table__  # type: ignore[attr-defined]


def call_totals(engine: Engine, experiment_id: int) -> list[dict[str, Any]]:
    """One row per (repetition, provider, model, purpose): calls, errors, tokens, cost, latency.

    `cost_usd` is None when no call of the row has a known price.
    """
    c, r = _L.c, _R.c
    q = (
        select(
            r.repetition, c.provider, c.model, c.purpose, func.count(c.id),
            func.sum(case((c.error.is_not(None), 1), else_=0)),
            func.sum(c.tokens_in), func.sum(c.tokens_out), func.sum(c.cache_read),
            func.sum(c.cache_write), func.sum(c.cost_usd), func.avg(c.latency_ms),
        )
        .join(_R, r.id == c.run_id)
        .where(c.experiment_id == experiment_id)
        .group_by(r.repetition, c.provider, c.model, c.purpose)
        .order_by(r.repetition, c.provider, c.model, c.purpose)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return [
        {
            "repetition": row[0], "provider": row[1], "model": row[2], "purpose": row[3],
            "calls": int(row[4] or 0), "errors": int(row[5] or 0),
            "tokens_in": int(row[6] or 0), "tokens_out": int(row[7] or 0),
            "cache_read": int(row[8] or 0), "cache_write": int(row[9] or 0),
            "cost_usd": None if row[10] is None else round(float(row[10]), 6),
            "latency_ms": round(float(row[11] or 0.0), 1),
        }
        for row in rows
    ]


def grand_total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of call_totals rows (cost None when none is known)."""
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {
        key: sum(r[key] for r in rows)
        for key in ("calls", "errors", "tokens_in", "tokens_out", "cache_read", "cache_write")
    } | {"cost_usd": round(sum(costs), 6) if costs else None}
