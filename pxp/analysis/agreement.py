"""Inter-annotator agreement on cases several annotators saw (docs/research.md, Agreement; the papers' h1/h2
design): pairwise Cohen's κ (Cohen 1960) and Krippendorff's α (nominal level, Krippendorff
2011, computed by the `krippendorff` package) on four fields of each annotator's session:

- `tag`: the human's first tag (the reply to the machine's INIT);
- `match`, `agree`: the human's judgements in that first reply, whether the machine's
  prediction matches theirs and whether its explanation agrees with theirs (DESIGN §1);
- `prediction`: the human's final prediction (their last message, whitespace stripped).

A case is an instance; each annotator counts with their earliest session on it (open sessions
are never counted, as everywhere in pxp.analysis). A missing value (an imported transcript
without match/agree facts, an empty prediction) leaves the case out of that field only.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import krippendorff
import numpy as np
import pandas as pd
from sqlalchemy import Engine, and_, func, select

from pxp.analysis.queries import IN, A, AnalysisError, M, S, Selection, cached, sessions_from, where
from pxp.protocols.pxp.intelligibility import cohen_kappa

#: The fields agreement is measured on, in report order.
FIELDS = ("tag", "match", "agree", "prediction")


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
        raise AnalysisError("which must be 'first' or 'last'")
    return list(cached(engine, "agreement", (sel, which), lambda: _agreement(engine, sel, which)))


def _agreement(engine: Engine, sel: Selection, which: str) -> list[Agreement]:
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


# --- Agreement on the four fields (docs/research.md, Agreement) -----------------------------------------------


def _value(field_: str, v: Any) -> str | None:
    """A field's value as a category, or None when missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if field_ in ("match", "agree"):
        return "true" if bool(v) else "false"
    text = str(v).strip()
    return text or None


def ratings(engine: Engine, sel: Selection) -> dict[str, dict[str, dict[int, str]]]:
    """Per field, per annotator: instance id → value (missing values left out)."""
    df = annotated_cases(engine, sel).rename(columns={"first": "tag"})
    out: dict[str, dict[str, dict[int, str]]] = {f: {} for f in FIELDS}
    for f in FIELDS:
        for ann, iid, v in zip(df["annotator"], df["instance_id"], df[f], strict=True):
            value = _value(f, v)
            if value is not None:
                out[f].setdefault(str(ann), {})[int(iid)] = value
    return out


def krippendorff_alpha(by_annotator: dict[str, dict[int, str]]) -> float | None:
    """Krippendorff's α, nominal level, over every annotator and case; None when undefined
    (no case rated twice, or a single value in all the ratings: no disagreement is possible)."""
    names = sorted(by_annotator)
    cases = sorted({c for r in by_annotator.values() for c in r})
    domain = sorted({v for r in by_annotator.values() for v in r.values()})
    if len(domain) < 2 or not any(sum(c in by_annotator[a] for a in names) >= 2 for c in cases):
        return None
    code = {v: float(i) for i, v in enumerate(domain)}
    data = np.array([[code[by_annotator[a][c]] if c in by_annotator[a] else np.nan for c in cases] for a in names])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 when the pairable values are all alike
        alpha = float(krippendorff.alpha(reliability_data=data, value_domain=list(code.values()),
                                         level_of_measurement="nominal"))
    return alpha if math.isfinite(alpha) else None


def field_agreement(by_annotator: dict[str, dict[int, str]]) -> dict[str, Any]:
    """{"krippendorff_alpha": α, "pairs": {"a1|a2": {"cohen_kappa": κ, "n": shared cases}}}."""
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in combinations(sorted(by_annotator), 2):
        shared = sorted(set(by_annotator[a]) & set(by_annotator[b]))
        if shared:
            k = cohen_kappa([(by_annotator[a][c], by_annotator[b][c]) for c in shared])
            pairs[f"{a}|{b}"] = {"cohen_kappa": k, "n": len(shared)}
    return {"krippendorff_alpha": krippendorff_alpha(by_annotator), "pairs": pairs}


def agreement_report(engine: Engine, sel: Selection) -> dict[str, Any]:
    """`{"agreement": {field: field_agreement}}` for the fields tag, match, agree, prediction."""
    def compute() -> dict[str, Any]:
        r = ratings(engine, sel)
        return {"agreement": {f: field_agreement(r[f]) for f in FIELDS}}

    return copy.deepcopy(cached(engine, "agreement_report", sel, compute))  # a copy the caller may change


def agreement_frame(report: dict[str, Any]) -> pd.DataFrame:
    """agreement_report as a table: one row per field and annotator pair, α on every row of its field."""
    recs = []
    for f, fa in report["agreement"].items():
        for pair, p in fa["pairs"].items():
            a, b = pair.split("|", 1)
            recs.append({"field": f, "annotator A": a, "annotator B": b, "cases": p["n"],
                         "Cohen's κ": p["cohen_kappa"], "Krippendorff's α": fa["krippendorff_alpha"]})
    return pd.DataFrame(recs, columns=["field", "annotator A", "annotator B", "cases", "Cohen's κ",
                                       "Krippendorff's α"])


def disagreements(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Per case, pair of annotators and field where they differ: both values and both session ids (pairs of one
    case's rows joined in pandas, not looped over: a study's 100,000 cases in well under a second)."""
    return cached(engine, "disagreements", sel, lambda: _disagreements(annotated_cases(engine, sel))).copy()


DISAGREEMENT_COLUMNS = ["instance", "field", "annotator_a", "value_a", "session_a", "annotator_b", "value_b",
                        "session_b"]


def _disagreements(cases: pd.DataFrame) -> pd.DataFrame:
    df = cases.rename(columns={"first": "tag"})
    if df.empty:
        return pd.DataFrame([], columns=DISAGREEMENT_COLUMNS)
    side = pd.DataFrame({"instance_id": df["instance_id"], "instance": df["instance"].astype(str),
                         "annotator": df["annotator"].astype(str), "session": df["session_id"].astype(int),
                         # a case's rows in the order the case first appears
                         "case_order": pd.factorize(df["instance_id"])[0],
                         **{f: [_value(f, v) for v in df[f]] for f in FIELDS}})
    pairs = side.merge(side, on="instance_id", suffixes=("_a", "_b"))
    pairs = pairs[pairs["annotator_a"] < pairs["annotator_b"]]
    parts = []
    for order, f in enumerate(FIELDS):
        va, vb = pairs[f"{f}_a"], pairs[f"{f}_b"]
        differ = pairs[va.notna() & vb.notna() & (va != vb)]
        parts.append(pd.DataFrame({
            "instance": differ["instance_a"], "field": f, "annotator_a": differ["annotator_a"],
            "value_a": differ[f"{f}_a"], "session_a": differ["session_a"], "annotator_b": differ["annotator_b"],
            "value_b": differ[f"{f}_b"], "session_b": differ["session_b"],
            "case_order": differ["case_order_a"], "field_order": order}))
    out = pd.concat(parts, ignore_index=True)
    out = out.sort_values(["instance", "annotator_a", "annotator_b", "case_order", "field_order"], kind="stable")
    return out[DISAGREEMENT_COLUMNS].reset_index(drop=True)


def render_agreement(report: dict[str, Any], dis: pd.DataFrame, fmt: str = "table") -> str:
    """agreement_report and the disagreement list as json (the report alone), csv (the agreement
    rows), markdown or a readable plain-text table."""
    if fmt == "json":
        return json.dumps(report, indent=2)
    df = agreement_frame(report)
    shown = df.assign(**{c: [_num(v) for v in df[c]] for c in ("Cohen's κ", "Krippendorff's α")})
    if fmt == "csv":
        return str(df.to_csv(index=False)).rstrip("\n")
    title = "Agreement (Cohen's κ per pair of annotators; Krippendorff's α, nominal, over all of them)"
    if fmt == "markdown":
        lines = [f"_{title}_", "", *_md_table(shown), "", f"_Disagreements ({len(dis)})_", "", *_md_table(dis)]
        return "\n".join(lines).rstrip()
    lines = [title, shown.to_string(index=False) if not df.empty else "No case was annotated by two annotators.",
             "", f"Disagreements ({len(dis)})"]
    if not dis.empty:
        short = dis.assign(value_a=[_short(v) for v in dis.value_a], value_b=[_short(v) for v in dis.value_b])
        lines.append(short.to_string(index=False))
    return "\n".join(lines)


def _short(v: str, most: int = 40) -> str:
    """A value on one line, at most `most` characters (a long SMILES or free-text prediction)."""
    one = " ".join(str(v).split())
    return one if len(one) <= most else one[:most - 1] + "…"


def _md_table(df: pd.DataFrame) -> list[str]:
    if df.empty:
        return ["(none)"]

    def cell(v: Any) -> str:
        return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(cell(c) for c in df.columns) + " |", "|" + " --- |" * len(df.columns),
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))]


def _num(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.3f}"
