"""Totals of the LLMCall rows per run (DESIGN §5, accounting): `pxp calls`, through SQLAlchemy Core without the ORM
(docs/development.md, "Start-up")."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Table, case, func, select

from pxp.storage import core_tables as ct

_L: Table = ct.llmcall
_R: Table = ct.run
_P: Table = ct.llmcall_pending


def call_totals(engine: Engine, experiment_id: int) -> list[dict[str, Any]]:
    """One row per (repetition, provider, model, purpose): calls, errors, tokens, cost, latency.

    `cost_usd` is None when no call of the row has a known price. `no_usage` counts the calls whose server
    sent no token counts (their tokens are unknown, not zero: docs/research.md, Local models). `unknown` counts
    the calls sent and never stored (in flight when the process was killed): spent, cost not known;
    they are included in `calls`.
    """
    c, r = _L.c, _R.c
    q = (
        select(
            r.repetition, c.provider, c.model, c.purpose, func.count(c.id),
            func.sum(case((c.error.is_not(None), 1), else_=0)),
            func.sum(c.tokens_in), func.sum(c.tokens_out), func.sum(c.cache_read),
            func.sum(c.cache_write), func.sum(c.cost_usd), func.avg(c.latency_ms),
            func.sum(case((c.tokens_in.is_(None), 1), else_=0)),
        )
        .join(_R, r.id == c.run_id)
        .where(c.experiment_id == experiment_id)
        .group_by(r.repetition, c.provider, c.model, c.purpose)
        .order_by(r.repetition, c.provider, c.model, c.purpose)
    )
    p = _P.c
    pending = (
        select(r.repetition, p.provider, p.model, p.purpose, func.count(p.id))
        .join(_R, r.id == p.run_id)
        .where(p.experiment_id == experiment_id)
        .group_by(r.repetition, p.provider, p.model, p.purpose)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
        unknown = {tuple(row[:4]): int(row[4]) for row in conn.execute(pending)}
    out = [
        {
            "repetition": row[0], "provider": row[1], "model": row[2], "purpose": row[3],
            "calls": int(row[4] or 0), "errors": int(row[5] or 0),
            "tokens_in": int(row[6] or 0), "tokens_out": int(row[7] or 0),
            "cache_read": int(row[8] or 0), "cache_write": int(row[9] or 0),
            "cost_usd": None if row[10] is None else round(float(row[10]), 6),
            "latency_ms": round(float(row[11] or 0.0), 1), "unknown": 0, "no_usage": int(row[12] or 0),
        }
        for row in rows
    ]
    by_key = {(o["repetition"], o["provider"], o["model"], o["purpose"]): o for o in out}
    for key, n in unknown.items():
        row_ = by_key.get(key)
        if row_ is None:
            row_ = by_key[key] = {"repetition": key[0], "provider": key[1], "model": key[2], "purpose": key[3],
                                  "calls": 0, "errors": 0, "tokens_in": 0, "tokens_out": 0, "cache_read": 0,
                                  "cache_write": 0, "cost_usd": None, "latency_ms": 0.0, "unknown": 0,
                                  "no_usage": 0}
            out.append(row_)
        row_["unknown"] += n
        row_["calls"] += n
    return sorted(out, key=lambda o: (o["repetition"], o["provider"], o["model"], o["purpose"]))


def grand_total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of call_totals rows (cost None when none is known)."""
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {
        key: sum(r[key] for r in rows)
        for key in ("calls", "errors", "tokens_in", "tokens_out", "cache_read", "cache_write", "unknown",
                    "no_usage")
    } | {"cost_usd": round(sum(costs), 6) if costs else None}
