"""Inter-annotator agreement on cases several annotators saw (the papers' h1/h2 design):
pairwise Cohen's κ (Cohen 1960) on the human tags. A case is an instance; each annotator
counts with their earliest session on it (open sessions are never counted)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import Engine, and_, func, select

from pxp.analysis.queries import IN, A, M, S, Selection, cached, sessions_from, where
from pxp.protocols.pxp.intelligibility import cohen_kappa


@dataclass
class Agreement:
    """Cohen's κ between two annotators on the instances both saw."""

    annotator_a: str
    annotator_b: str
    instances: int
    observed: float
    kappa: float | None
    pairs: list[tuple[str, str]] = field(default_factory=list)


def annotated_cases(engine: Engine, sel: Selection) -> pd.DataFrame:
    """One row per annotator and instance (their earliest annotated session): the first and last
    human tag, the first reply's match and agree, the final prediction (in SQL, one row per session)."""

    def compute() -> pd.DataFrame:
        human = (
            select(M.c.session_id, func.min(M.c.j).label("fj"), func.max(M.c.j).label("lj"))
            .where(M.c.sender == "human").group_by(M.c.session_id).subquery()
        )
        mf, ml = M.alias("mf"), M.alias("ml")
        frm = (
            sessions_from(sel, instance=True).join(A, A.c.id == S.c.annotator_id)
            .join(human, human.c.session_id == S.c.id)
            .join(mf, and_(mf.c.session_id == S.c.id, mf.c.j == human.c.fj))
            .join(ml, and_(ml.c.session_id == S.c.id, ml.c.j == human.c.lj))
        )
        q = (
            select(S.c.instance_id, A.c.name.label("annotator"), S.c.id.label("session_id"),
                   mf.c.tag.label("first"), ml.c.tag.label("last"), IN.c.key.label("instance"),
                   mf.c.match, mf.c.agree, ml.c.prediction)
            .select_from(frm).where(*where(sel)).order_by(S.c.id)
        )
        cols = ["instance_id", "annotator", "session_id", "first", "last", "instance", "match", "agree",
                "prediction"]
        with engine.connect() as c:
            df = pd.DataFrame([tuple(r) for r in c.execute(q)], columns=cols)
        return df.drop_duplicates(["instance_id", "annotator"], keep="first").reset_index(drop=True)

    return cached(engine, "annotated_cases", sel, compute).copy()


def annotator_tags(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Each annotated session's first and last human tag, for the earliest session per
    instance and annotator (in SQL: one row per session, never the messages)."""
    return annotated_cases(engine, sel)[["instance_id", "annotator", "session_id", "first", "last"]]


def agreement(engine: Engine, sel: Selection, which: str = "first") -> list[Agreement]:
    """Cohen's κ on the human tags ("first": the reply to INIT; "last": the final verdict)
    for every pair of annotators, over the instances both annotated."""
    if which not in ("first", "last"):
        raise ValueError("which must be 'first' or 'last'")
    per = annotator_tags(engine, sel)
    out: list[Agreement] = []
    names = sorted(per["annotator"].unique()) if not per.empty else []
    by = {a: dict(zip(d.instance_id, d[which], strict=True)) for a, d in per.groupby("annotator")} if names else {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(by[a]) & set(by[b]))
            if not shared:
                continue
            pairs = [(str(by[a][x]), str(by[b][x])) for x in shared]
            observed = sum(x == y for x, y in pairs) / len(pairs)
            out.append(Agreement(a, b, len(pairs), observed, cohen_kappa(pairs), pairs))
    return out
