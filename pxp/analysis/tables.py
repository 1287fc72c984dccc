"""Intelligibility tables at scale (DESIGN §2; follow-up paper, Tab. 1 and Fig. 1): Table 1
per group, Figure 1's data, the per-repetition counts, breakdowns by label or annotator,
session lengths, tag transitions and the per-session flags, from pxp.analysis.queries' rows.

Each distinct packed sequence is reduced once to its signature (intelligibility.signature:
the first message at which each agent sent a positive tag, a REJECT, a negative tag, any
tag, a REVISE); every Definition 1–2 property of a session cut to its first j messages is
true exactly on an interval of j (intelligibility.metric_intervals), so Table 1 (whole
sessions) and Figure 1 (j = 1..n) follow without a message in Python. The repetitions are
aggregated by intelligibility.aggregate, as on the pure reference path.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, select

from pxp.analysis.queries import (
    IN,
    PER_WORD,
    A,
    E,
    M,
    R,
    S,
    Selection,
    SigRow,
    bound,
    cached,
    packed_cols,
    sessions_from,
    signature_rows,
    unpack,
    where,
    words_for,
)
from pxp.protocols.pxp.intelligibility import (
    METRICS,
    RepetitionCounts,
    Table1,
    aggregate,
    in_interval,
    metric_intervals,
    signature,
    signature_flags,
    table1_rows,
)
from pxp.protocols.pxp.rules import Sender, Tag

if TYPE_CHECKING:
    import pandas as pd

# --- Table 1 and Figure 1 --------------------------------------------------------------------


def repetition_counts(rows: Sequence[SigRow], n: int) -> dict[str, dict[int, RepetitionCounts]]:
    """RepetitionCounts per group and repetition from signature rows (aborted: never intelligible).

    A property true on [lo, hi) adds the sessions at lo and removes them at hi in a difference
    array; a running sum then gives the count at every bound j = 1..n.
    """
    acc: dict[tuple[str, int], tuple[list[int], dict[str, int], dict[str, list[int]]]] = {}
    memo: dict[tuple[tuple[Sender, Tag], ...], list[tuple[str, int, int, bool]]] = {}
    for r in rows:
        a = acc.get((r.group, r.repetition))
        if a is None:
            a = acc[(r.group, r.repetition)] = ([0, 0], dict.fromkeys(METRICS, 0),
                                                {name: [0] * (n + 2) for name in METRICS})
        a[0][0] += r.sessions
        if r.status == "aborted":
            a[0][1] += r.sessions
            continue
        spans = memo.get(r.tags)
        if spans is None:
            spans = memo[r.tags] = _spans(r.tags, n)
        for name, lo, hi, whole in spans:
            if whole:
                a[1][name] += r.sessions
            if lo < hi:
                a[2][name][lo] += r.sessions
                a[2][name][hi] -= r.sessions
    out: dict[str, dict[int, RepetitionCounts]] = defaultdict(dict)
    for (group, rep), (tot, metrics, diff) in acc.items():
        by_message = {name: list(accumulate(d))[1:n + 1] for name, d in diff.items()}
        out[group][rep] = RepetitionCounts(tot[0], tot[1], metrics, by_message)
    return dict(out)


def _spans(tags: tuple[tuple[Sender, Tag], ...], n: int) -> list[tuple[str, int, int, bool]]:
    """(metric, lo, hi, whole-session flag) with lo..hi clipped to the bounds 1..n+1."""
    out = []
    for name, iv in metric_intervals(signature(tags)).items():
        lo, hi = iv
        whole = in_interval(iv)
        if lo is None:
            out.append((name, 0, 0, whole))
            continue
        out.append((name, min(max(lo, 1), n + 1), min(hi if hi is not None else n + 1, n + 1), whole))
    return out



def table1(engine: Engine, sel: Selection, *, n: int | None = None) -> Table1:
    """Table 1 and the Figure 1 curves for the selection, median over its repetitions."""
    return table1_by(engine, sel, None, n=n).get("", aggregate([], n or bound(engine, sel)))


def table1_by(engine: Engine, sel: Selection, by: str | None, *, n: int | None = None) -> dict[str, Table1]:
    """Table 1 per group (experiment, annotator, label or dataset), each over its repetitions.

    A repetition counts for a group when the group has at least one finished or aborted
    session in it.
    """
    n = n or bound(engine, sel)

    def compute() -> dict[str, Table1]:
        reps = repetition_counts(signature_rows(engine, sel, by), n)
        return {g: aggregate([rc[r] for r in sorted(rc)], n) for g, rc in sorted(reps.items())}

    return cached(engine, "table1_by", (sel, by, n), compute)


def figure1_frame(t: Table1, name: str = "") -> pd.DataFrame:
    """Figure 1's data: per metric and bound j, the median, min and max over repetitions."""
    import pandas as pd

    recs = []
    for metric in METRICS:
        for j, med in enumerate(t.by_message.get(metric, []), start=1):
            recs.append({
                "group": name, "metric": metric, "j": j, "median": med,
                "min": t.by_message_min[metric][j - 1], "max": t.by_message_max[metric][j - 1],
            })
    return pd.DataFrame(recs, columns=["group", "metric", "j", "median", "min", "max"])


#: Figure 1's CSV (docs/research.md, Exports): figure1_frame's columns with their units, and the totals and
#: proportions the figure draws when the totals differ
FIGURE1_CSV = {"group": "group", "metric": "metric", "j": "bound j (messages)", "median": "median (sessions)",
               "min": "min (sessions)", "max": "max (sessions)", "total": "total (sessions)",
               "proportion": "proportion (of total)", "proportion_min": "min proportion (of total)",
               "proportion_max": "max proportion (of total)"}


def figure1_csv_frame(tables: dict[str, Table1]) -> pd.DataFrame:
    """Figure 1's data for download: per group, metric and bound, the counts with the group's (median) total and
    the proportions of it (pxp.analysis.figures.figure1 draws the same quotients)."""
    import pandas as pd

    frames = []
    for name, t in tables.items():
        df = figure1_frame(t, name)
        total = t.total_sessions
        df["total"] = int(total) if float(total).is_integer() else total
        for col, src in (("proportion", "median"), ("proportion_min", "min"), ("proportion_max", "max")):
            df[col] = df[src].astype(float) / total if total else 0.0
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=list(FIGURE1_CSV.values()))
    return pd.concat(frames, ignore_index=True).rename(columns=FIGURE1_CSV)[list(FIGURE1_CSV.values())]


def table1_frame(tables: dict[str, Table1]) -> pd.DataFrame:
    """The papers' Table 1 layout: rows = counts, one column per group, `count (proportion)`."""
    import pandas as pd

    cols: dict[str, list[str]] = {}
    ranges: dict[str, list[str]] = {}
    labels: list[str] = []
    for name, t in tables.items():
        body = table1_rows(t.as_json(name))
        labels = [a for a, _, _ in body] + ["Aborted sessions (apart)"]
        cols[name] = [b for _, b, _ in body] + [str(t.as_json(name)["aborted_sessions"])]
        ranges[name] = [c for _, _, c in body] + [""]
    df = pd.DataFrame({"Count": labels})
    for name in tables:
        df[name] = cols[name]
        if tables[name].repetitions > 1:
            df[f"{name} min–max"] = ranges[name]
    return df


def repetition_frame(engine: Engine, sel: Selection, by: str | None = None) -> pd.DataFrame:
    """Per group and repetition: total, aborted and the seven counts (what the medians are of); cached by data
    version."""
    return cached(engine, "repetition_frame", (sel, by), lambda: _repetition_frame(engine, sel, by)).copy()


def _repetition_frame(engine: Engine, sel: Selection, by: str | None) -> pd.DataFrame:
    import pandas as pd

    rows = signature_rows(engine, sel, by)
    n = bound(engine, sel)
    recs = []
    for group, reps in sorted(repetition_counts(rows, n).items()):
        for rep, rc in sorted(reps.items()):
            recs.append({"group": group, "repetition": rep, "total_sessions": rc.total_sessions,
                         "aborted_sessions": rc.aborted_sessions, **rc.metrics})
    return pd.DataFrame(recs, columns=["group", "repetition", "total_sessions", "aborted_sessions", *METRICS])


def breakdown_frame(tables: dict[str, Table1], name: str = "group") -> pd.DataFrame:
    """One row per group (label, annotator...): median total, aborted, and each metric's count and proportion."""
    import pandas as pd

    recs = []
    for g, t in tables.items():
        rec: dict[str, Any] = {name: g, "repetitions": t.repetitions, "total_sessions": t.total_sessions,
                               "aborted_sessions": t.aborted_sessions}
        for m in METRICS:
            rec[m] = t.metrics[m].count
            rec[f"{m} (proportion)"] = round(t.metrics[m].proportion, 4)
        recs.append(rec)
    cols = [name, "repetitions", "total_sessions", "aborted_sessions",
            *[c for m in METRICS for c in (m, f"{m} (proportion)")]]
    return pd.DataFrame(recs, columns=cols)


SHORT_LABELS = {
    "one_way_human": "1-way Human", "one_way_machine": "1-way Machine", "two_way": "2-way",
    "strong_human": "Strong Human", "strong_machine": "Strong Machine",
    "ultra_strong_human": "Ultra-Strong Human", "ultra_strong_machine": "Ultra-Strong Machine",
}


def breakdown_display(df: pd.DataFrame) -> pd.DataFrame:
    """breakdown_frame for reading: `count (proportion)` cells under short Table 1 labels."""
    out = df.iloc[:, :4].copy()
    out.columns = [df.columns[0], "repetitions", "total sessions", "aborted"]
    for m in METRICS:
        out[SHORT_LABELS[m]] = [f"{_fmt_num(c)} ({p:.2f})" for c, p in zip(df[m], df[f"{m} (proportion)"],
                                                                           strict=True)]
    return out


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"



def session_lengths(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Session length distribution: sessions per (messages, status, stop reason)."""
    import pandas as pd

    agg: dict[tuple[int, str, str], int] = defaultdict(int)
    for r in signature_rows(engine, sel):
        agg[(r.length, r.status, r.stop_reason or "")] += r.sessions
    return pd.DataFrame(
        [{"messages": k[0], "status": k[1], "stop_reason": k[2], "sessions": v} for k, v in sorted(agg.items())],
        columns=["messages", "status", "stop_reason", "sessions"],
    )


# --- Per-session flags (downloads) ------------------------------------------------------------


def session_frame(engine: Engine, sel: Selection) -> pd.DataFrame:
    """One row per finished or aborted session with its seven Table 1 flags (vectorised)."""
    return cached(engine, "session_frame", sel, lambda: _session_frame(engine, sel)).copy()


def _session_frame(engine: Engine, sel: Selection) -> pd.DataFrame:
    import pandas as pd

    words = words_for(bound(engine, sel))
    cols = [
        S.c.id.label("session_id"), E.c.name.label("experiment"), R.c.repetition, S.c.ordinal,
        IN.c.key.label("instance"), IN.c.label, A.c.name.label("annotator"), S.c.status,
        S.c.stop_reason, S.c.created_at,
    ]
    names = [x.name for x in cols]
    while True:
        wnames = [f"w{w}" for w in range(words)]
        packed = (
            select(S.c.id.label("sid"), *packed_cols(words), func.coalesce(func.max(M.c.j), 0).label("messages"))
            .select_from(sessions_from(sel).outerjoin(M, M.c.session_id == S.c.id))
            .where(*where(sel)).group_by(S.c.id).subquery()
        )
        frm = (
            packed.join(S, S.c.id == packed.c.sid).join(R, R.c.id == S.c.run_id)
            .join(E, E.c.id == R.c.experiment_id).join(IN, IN.c.id == S.c.instance_id)
            .outerjoin(A, A.c.id == S.c.annotator_id)
        )
        q = (
            select(*cols, *(packed.c[w] for w in wnames), packed.c.messages).select_from(frm)
            .order_by(E.c.name, R.c.repetition, S.c.ordinal)
        )
        with engine.connect() as c:
            df = pd.DataFrame([tuple(r) for r in c.execute(q)], columns=[*names, *wnames, "messages"])
        longest = int(df["messages"].max()) if len(df) else 0
        if longest <= words * PER_WORD:
            break
        words = words_for(longest)
    memo: dict[tuple[Any, ...], dict[str, bool]] = {}
    flags: list[dict[str, bool]] = []
    for key in zip(*(df[w] for w in wnames), df["messages"], strict=True):
        f = memo.get(key)
        if f is None:
            f = memo[key] = signature_flags(signature(unpack(key[:-1], int(key[-1]))))
        flags.append(f)
    fl = pd.DataFrame(flags, columns=list(METRICS), index=df.index, dtype=bool)
    live = (df["status"] != "aborted").to_numpy()
    for name in METRICS:
        df[name] = fl[name].to_numpy() & live
    return df.drop(columns=wnames)


def to_parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


# --- Tag transitions --------------------------------------------------------------------------


def tag_transitions(engine: Engine, sel: Selection) -> pd.DataFrame:
    """Which tag answers which: counts of (message j−1 sender and tag) → (message j sender and tag).

    Read off the packed sequences Table 1 is computed from (no extra pass over the messages).
    """
    import pandas as pd


    def compute() -> pd.DataFrame:
        agg: dict[tuple[str, str, str, str], int] = defaultdict(int)
        for r in signature_rows(engine, sel):
            for (s1, t1), (s2, t2) in zip(r.tags, r.tags[1:], strict=False):
                agg[(s1.value, t1.value, s2.value, t2.value)] += r.sessions
        return pd.DataFrame([(*k, v) for k, v in sorted(agg.items())],
                            columns=["from_sender", "from_tag", "to_sender", "to_tag", "count"])

    return cached(engine, "tag_transitions", sel, compute).copy()


def transition_matrix(df: pd.DataFrame) -> pd.DataFrame:
    """Rows "sender TAG" of message j−1, columns the tag that answered it (message j)."""
    import pandas as pd

    order = ["INIT", "RATIFY", "REFUTE", "REVISE", "REJECT"]
    if df.empty:
        return pd.DataFrame(0, index=[], columns=order[1:])
    d = df.assign(answered=df.from_sender + " " + df.from_tag)
    mat = d.pivot_table(index="answered", columns="to_tag", values="count", aggfunc="sum", fill_value=0)
    cols = [c for c in order if c in mat.columns] + [c for c in mat.columns if c not in order]
    idx = sorted(mat.index, key=lambda s: (order.index(s.split(" ")[1]) if s.split(" ")[1] in order else 99, s))
    return mat.loc[idx, cols].astype(int)

