"""LLM cost and latency of the selection's sessions and experiments (DESIGN §5): sums over the
stored LLMCall rows, per session and per provider, model and purpose."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, case, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from pxp.analysis.queries import LC, E, R, S, Selection, cached, sessions_from, where


def llm_costs(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Per session: LLM calls, tokens, cost and latency (sums over its calls)."""

    def compute() -> pd.DataFrame:
        frm = sessions_from(sel).join(E, E.c.id == R.c.experiment_id).join(LC, LC.c.session_id == S.c.id)
        keys = [S.c.id.label("session_id"), E.c.name.label("experiment"), R.c.repetition, S.c.ordinal]
        q = (
            select(*keys, func.count(LC.c.id).label("calls"),
                   func.sum(LC.c.tokens_in).label("tokens_in"), func.sum(LC.c.tokens_out).label("tokens_out"),
                   func.sum(LC.c.cache_read).label("cache_read"),
                   func.sum(LC.c.cost_usd).label("cost_usd"), func.sum(LC.c.latency_ms).label("latency_ms"),
                   func.max(LC.c.latency_ms).label("max_call_latency_ms"),
                   func.sum(case((LC.c.error.is_not(None), 1), else_=0)).label("errors"))
            .select_from(frm).where(*where(sel)).group_by(*keys).order_by(E.c.name, R.c.repetition, S.c.ordinal)
        )
        with engine.connect() as c:
            df = pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "session_id", "experiment", "repetition", "ordinal", "calls", "tokens_in", "tokens_out",
                "cache_read", "cost_usd", "latency_ms", "max_call_latency_ms", "errors"])
        return df

    return cached(engine, "llm_costs", sel, compute).copy()


def llm_summary(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Totals per provider, model and purpose for the selection's experiments (all calls); `no_usage`: the calls
    whose server sent no token counts (unknown tokens, docs/research.md, Local models)."""

    def compute() -> pd.DataFrame:
        frm = LC.outerjoin(R, R.c.id == LC.c.run_id)
        conds: list[ColumnElement[bool]] = []
        if sel.experiments:
            conds.append(LC.c.experiment_id.in_(sel.experiments))  # bounded: picked
        if sel.repetitions:
            conds.append(or_(R.c.repetition.in_(sel.repetitions), LC.c.run_id.is_(None)))  # bounded: picked
        keys = [LC.c.provider, LC.c.model, LC.c.purpose]
        q = (
            select(*keys, func.count(LC.c.id).label("calls"), func.sum(LC.c.tokens_in).label("tokens_in"),
                   func.sum(LC.c.tokens_out).label("tokens_out"), func.sum(LC.c.cost_usd).label("cost_usd"),
                   func.avg(LC.c.latency_ms).label("mean_latency_ms"),
                   func.sum(case((LC.c.error.is_not(None), 1), else_=0)).label("errors"),
                   func.sum(case((LC.c.tokens_in.is_(None), 1), else_=0)).label("no_usage"))
            .select_from(frm).where(*conds).group_by(*keys).order_by(*keys)
        )
        with engine.connect() as c:
            return pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "provider", "model", "purpose", "calls", "tokens_in", "tokens_out", "cost_usd",
                "mean_latency_ms", "errors", "no_usage"])

    return cached(engine, "llm_summary", sel, compute).copy()

