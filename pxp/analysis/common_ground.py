"""Common-ground probe results per session, next to Table 1 (docs/research.md, Common-ground probe).

Per probed session: probe accuracy and Cohen's κ (pxp.protocols.pxp.common_ground.score, the
scorekeeping game's episode scores) and whether the session is one-way intelligible for the
human and for the machine (Definition 1, pxp.protocols.pxp.intelligibility). `pxp report` and
the Analytics page's "Common ground" view read them from here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean, median
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select

from pxp.protocols.pxp.common_ground import ProbeResult, score
from pxp.protocols.pxp.intelligibility import session_flags
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.storage import core_tables as ct

if TYPE_CHECKING:
    import pandas as pd

_P, _S, _R, _M = ct.probe, ct.session, ct.run, ct.message  # Core: no ORM (docs/development.md, "Start-up")

COLUMNS = ["experiment_id", "repetition", "ordinal", "session_id", "status", "probes", "valid", "accuracy",
           "kappa", "one_way_human", "one_way_machine"]


def probe_sessions(engine: Engine, experiment_ids: Sequence[int]) -> list[dict[str, Any]]:
    """One row per probed session of the experiments (COLUMNS), in (experiment, repetition, ordinal) order."""
    if not experiment_ids:
        return []
    ids = list(experiment_ids)
    probes: dict[int, list[ProbeResult]] = defaultdict(list)
    runs = _S.join(_R, _R.c.id == _S.c.run_id)
    scope = _R.c.experiment_id.in_(ids)  # bounded: the experiments asked for
    probed = _S.c.id.in_(select(_P.c.session_id))  # joined in SQL, never a list of sessions
    with engine.connect() as conn:
        head = {r.id: r for r in conn.execute(
            select(_S.c.id, _S.c.ordinal, _S.c.status, _R.c.experiment_id, _R.c.repetition)
            .select_from(runs).where(scope, probed))}
        if not head:
            return []
        for p in conn.execute(select(_P).select_from(_P.join(runs, _S.c.id == _P.c.session_id)).where(scope)
                              .order_by(_P.c.j)):
            probes[p.session_id].append(ProbeResult(p.j, p.question, p.truth, p.answer, p.valid))
        tags: dict[int, list[tuple[Sender, Tag]]] = defaultdict(list)
        for m in conn.execute(select(_M.c.session_id, _M.c.sender, _M.c.tag)
                              .select_from(_M.join(runs, _S.c.id == _M.c.session_id)).where(scope, probed)
                              .order_by(_M.c.session_id, _M.c.j)):
            tags[m.session_id].append((Sender(m.sender), Tag(m.tag)))
    rows = []
    for sid, h in head.items():
        sc = score(probes[sid])
        flags = session_flags(tags[sid], aborted=h.status == "aborted")
        rows.append({
            "experiment_id": h.experiment_id, "repetition": h.repetition, "ordinal": h.ordinal,
            "session_id": sid, "status": h.status, "probes": sc.probes, "valid": sc.valid,
            "accuracy": sc.accuracy, "kappa": sc.kappa,
            "one_way_human": flags["one_way_human"], "one_way_machine": flags["one_way_machine"],
        })
    rows.sort(key=lambda r: (r["experiment_id"], r["repetition"], r["ordinal"]))
    return rows


def probe_frame(engine: Engine, experiment_ids: Sequence[int]) -> pd.DataFrame:
    """probe_sessions as a DataFrame (the Analytics page's "Common ground" view)."""
    import pandas as pd

    return pd.DataFrame(probe_sessions(engine, experiment_ids), columns=COLUMNS)


def _mean(xs: list[float]) -> float | None:
    return round(mean(xs), 4) if xs else None


def probe_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sessions probed, probes, mean accuracy, median κ, and mean accuracy by one-way (human) yes/no."""
    acc = [r["accuracy"] for r in rows if r["accuracy"] is not None]
    kap = [r["kappa"] for r in rows if r["kappa"] is not None]
    by = {flag: [r["accuracy"] for r in rows if r["one_way_human"] is flag and r["accuracy"] is not None]
          for flag in (True, False)}
    return {
        "sessions": len(rows),
        "probes": sum(r["probes"] for r in rows),
        "invalid": sum(r["probes"] - r["valid"] for r in rows),
        "mean_accuracy": _mean(acc),
        "median_kappa": round(median(kap), 4) if kap else None,
        "mean_accuracy_one_way_human": _mean(by[True]),
        "mean_accuracy_not_one_way_human": _mean(by[False]),
    }


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def render_probes(report: dict[str, Any], fmt: str) -> list[str]:
    """The probe section of a text/markdown report: a summary line and one line per session."""
    pr = report.get("probes")
    if not pr:
        return []
    s = pr["summary"]
    md = fmt == "markdown"
    lines = ["", f"{report['experiment']}: common-ground probe: {s['sessions']} sessions, "
             f"{s['probes']} probes ({s['invalid']} invalid), mean accuracy {_num(s['mean_accuracy'])}, "
             f"median κ {_num(s['median_kappa'])}; mean accuracy when 1-way intelligible for the human "
             f"{_num(s['mean_accuracy_one_way_human'])}, when not {_num(s['mean_accuracy_not_one_way_human'])}"]
    head = ["rep", "session", "probes", "accuracy", "κ", "1-way h", "1-way m"]
    body = [[str(r["repetition"]), str(r["ordinal"]), str(r["probes"]), _num(r["accuracy"]), _num(r["kappa"]),
             "yes" if r["one_way_human"] else "no", "yes" if r["one_way_machine"] else "no"]
            for r in pr["sessions"]]
    if md:
        lines += ["", "| " + " | ".join(head) + " |", "|" + " --: |" * len(head),
                  *["| " + " | ".join(b) + " |" for b in body]]
        return lines
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines += ["  ".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)) for row in [head, *body]]
    return lines
