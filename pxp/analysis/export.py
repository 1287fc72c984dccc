"""`pxp export`: an experiment's blackboard Δ = {D, M, C}, its evaluations, calls and probes, as files.

Layout (one directory, `--out PATH`; EXT is jsonl, csv or parquet):

    experiment.json     name, task, mode, status, n, k, the full stored config, the repetitions
                        (seed, status, instance order by key), and the files and their columns
    sessions.EXT        D: one row per session — repetition, session, ordinal, instance (key),
                        split, status, stop_reason, abort_reason, annotator, context_kept,
                        learn_note, learn_val_before, learn_val_after, messages
    messages.EXT        M: one row per message — session, instance, repetition, j, sender,
                        receiver, tag, prediction, explanation, match, agree, changed, annotator,
                        status (of the session), created_at
    contexts.EXT        C: one row per message — repetition, session, j, content (JSON text in csv/parquet)
    evaluations.EXT     machine performance — repetition, after_session, split,
                        prediction_accuracy, explanation_accuracy, both_accuracy, instances
    calls.EXT           LLM call accounting — repetition, session, j, provider, model, purpose,
                        attempt, tokens_in, tokens_out, cache_read, cache_write, latency_ms,
                        cost_usd, error
    probes.EXT          the common-ground probe (`pxp run --probe`, docs/research.md, Common-ground probe) — repetition,
                        session, j (the human message after which it was asked), question, truth,
                        answer, valid, created_at; written with no rows for an unprobed run

Rows are ordered by repetition, session ordinal and j (probes then by question, in the order of
pxp.protocols.pxp.common_ground.QUESTIONS). `messages.jsonl` is in the transcripts format
(DESIGN §6), so `pxp import transcripts messages.jsonl` reads it back, aborted sessions included
(open sessions of a paused run are refused there); it reads the M table only (no probes). A
session aborted before its first message has one row with j, sender and tag empty and status
"aborted".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp import __version__
from pxp.agents.base import call_fields
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.common_ground import QUESTIONS
from pxp.storage.store import db_session, find_experiment
from pxp.storage.tables import (
    Annotator,
    Context,
    Evaluation,
    Experiment,
    Instance,
    LLMCall,
    Message,
    Probe,
    Run,
    Session,
    utcnow,
)

FORMATS = ("jsonl", "csv", "parquet")
TABLES = ("sessions", "messages", "contexts", "evaluations", "calls", "probes")


class ExportError(PxpError, ValueError):
    """An export that cannot be written (unknown experiment or format, unwritable path)."""


@dataclass
class Exported:
    directory: Path
    files: dict[str, Path]
    rows: dict[str, int]


def _iso(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def experiment_tables(engine: Engine, exp: Experiment) -> dict[str, list[dict[str, Any]]]:
    """The D, M, C, evaluation, call and probe rows of one experiment, as plain dicts."""
    with db_session(engine) as db:
        runs = {r.id: r for r in db.exec(select(Run).where(Run.experiment_id == exp.id)).all()}
        rep = {rid: r.repetition for rid, r in runs.items()}
        sessions = sorted(
            db.exec(select(Session).where(col(Session.run_id).in_(list(runs)))).all(),
            key=lambda s: (rep[s.run_id], s.ordinal),
        )
        sids = [s.id for s in sessions]
        order = {s.id: i for i, s in enumerate(sessions)}
        inst_ids = {s.instance_id for s in sessions}
        instances = {i.id: i for i in db.exec(select(Instance).where(col(Instance.id).in_(inst_ids))).all()}
        ann_ids = {s.annotator_id for s in sessions if s.annotator_id is not None}
        annotators = {a.id: a.name for a in db.exec(select(Annotator).where(col(Annotator.id).in_(ann_ids))).all()}
        messages = sorted(
            db.exec(select(Message).where(col(Message.session_id).in_(sids))).all(),
            key=lambda m: (order[m.session_id], m.j),
        )
        contexts = sorted(
            db.exec(select(Context).where(col(Context.session_id).in_(sids))).all(),
            key=lambda c: (order[c.session_id], c.j),
        )
        evaluations = sorted(
            db.exec(select(Evaluation).where(col(Evaluation.run_id).in_(list(runs)))).all(),
            key=lambda e: (rep[e.run_id], e.after_session, e.split),
        )
        calls = list(
            db.exec(select(LLMCall).where(LLMCall.experiment_id == exp.id).order_by(col(LLMCall.id))).all()
        )
        rank = {q: i for i, q in enumerate(QUESTIONS)}
        probes = sorted(
            db.exec(select(Probe).where(col(Probe.session_id).in_(sids))).all(),
            key=lambda p: (order[p.session_id], p.j, rank.get(p.question, len(rank)), p.question),
        )
    by_id = {s.id: s for s in sessions}
    counts: dict[int | None, int] = {}
    for m in messages:
        counts[m.session_id] = counts.get(m.session_id, 0) + 1

    def key(s: Session) -> str:
        inst = instances.get(s.instance_id)
        return inst.key if inst is not None else str(s.instance_id)

    d = [
        {
            "repetition": rep[s.run_id],
            "session": s.id,
            "ordinal": s.ordinal,
            "instance": key(s),
            "split": instances[s.instance_id].split if s.instance_id in instances else None,
            "status": s.status,
            "stop_reason": s.stop_reason,
            "abort_reason": s.abort_reason,
            "annotator": annotators.get(s.annotator_id) if s.annotator_id is not None else None,
            "context_kept": s.context_kept,
            "learn_note": s.learn_note,
            "learn_val_before": s.learn_val_before,
            "learn_val_after": s.learn_val_after,
            "messages": counts.get(s.id, 0),
        }
        for s in sessions
    ]
    m_rows = []
    for m in messages:
        s = by_id[m.session_id]
        m_rows.append({
            "session": m.session_id,
            "instance": key(s),
            "repetition": rep[s.run_id],
            "j": m.j,
            "sender": m.sender,
            "receiver": m.receiver,
            "tag": m.tag,
            "prediction": m.prediction,
            "explanation": m.explanation,
            "match": m.match,
            "agree": m.agree,
            "changed": m.changed,
            "annotator": annotators.get(s.annotator_id) if s.annotator_id is not None else None,
            "status": s.status,
            "created_at": _iso(m.created_at),
        })
    # an aborted session with no message (e.g. no parseable INIT) keeps one row, so that
    # `pxp import transcripts messages.jsonl` still counts it apart
    ordinal = {s.id: s.ordinal for s in sessions}
    for s in sessions:
        if s.status == "aborted" and not counts.get(s.id):
            m_rows.append({
                "session": s.id, "instance": key(s), "repetition": rep[s.run_id], "j": None, "sender": None,
                "receiver": None, "tag": None, "prediction": None, "explanation": None, "match": None,
                "agree": None, "changed": None,
                "annotator": annotators.get(s.annotator_id) if s.annotator_id is not None else None,
                "status": s.status, "created_at": _iso(s.created_at),
            })
    m_rows.sort(key=lambda r: (r["repetition"], ordinal.get(r["session"], 0), r["j"] or 0))
    c_rows = [
        {"repetition": rep[by_id[c.session_id].run_id], "session": c.session_id, "j": c.j, "content": c.content}
        for c in contexts
    ]
    e_rows = [
        {
            "repetition": rep[e.run_id],
            "after_session": e.after_session,
            "split": e.split,
            "prediction_accuracy": e.prediction_accuracy,
            "explanation_accuracy": e.explanation_accuracy,
            "both_accuracy": e.both_accuracy,
            "instances": e.instances,
        }
        for e in evaluations
    ]
    k_rows = [
        {
            "repetition": rep.get(c.run_id) if c.run_id is not None else None,
            "session": c.session_id,
            "j": c.j,
            **call_fields(c),
        }
        for c in calls
    ]
    p_rows = [
        {"repetition": rep[by_id[p.session_id].run_id], "session": p.session_id, "j": p.j, "question": p.question,
         "truth": p.truth, "answer": p.answer, "valid": p.valid, "created_at": _iso(p.created_at)}
        for p in probes
    ]
    return {"sessions": d, "messages": m_rows, "contexts": c_rows, "evaluations": e_rows, "calls": k_rows,
            "probes": p_rows}


def _write(path: Path, rows: list[dict[str, Any]], fmt: str, columns: list[str]) -> None:
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        return
    import pandas as pd

    flat = [{k: (json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v) for k, v in r.items()}
            for r in rows]
    df = pd.DataFrame(flat, columns=columns)
    if "j" in df.columns:  # whole numbers even where a message-less aborted session leaves j empty
        df["j"] = df["j"].astype("Int64")
    if fmt == "csv":
        df.to_csv(path, index=False)
    else:
        for c in df.columns:  # all-null or mixed columns: keep parquet's types simple and stable
            if df[c].dtype == object:
                df[c] = df[c].astype("string")
        df.to_parquet(path, index=False)


_COLUMNS = {
    "sessions": ["repetition", "session", "ordinal", "instance", "split", "status", "stop_reason", "abort_reason",
                 "annotator", "context_kept", "learn_note", "learn_val_before", "learn_val_after", "messages"],
    "messages": ["session", "instance", "repetition", "j", "sender", "receiver", "tag", "prediction", "explanation",
                 "match", "agree", "changed", "annotator", "status", "created_at"],
    "contexts": ["repetition", "session", "j", "content"],
    "evaluations": ["repetition", "after_session", "split", "prediction_accuracy", "explanation_accuracy",
                    "both_accuracy", "instances"],
    "calls": ["repetition", "session", "j", "provider", "model", "purpose", "attempt", "tokens_in", "tokens_out",
              "cache_read", "cache_write", "latency_ms", "cost_usd", "error"],
    "probes": ["repetition", "session", "j", "question", "truth", "answer", "valid", "created_at"],
}


def export_experiment(engine: Engine, name_or_id: str, out: Path, fmt: str = "jsonl") -> Exported:
    """Write the experiment's tables into directory `out` in the layout above."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    with db_session(engine) as db:
        exp = find_experiment(db, name_or_id=name_or_id)
    if exp is None:
        raise ExportError(f"no experiment named {name_or_id!r}")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"cannot create {out}: {e.strerror}") from None
    tables = experiment_tables(engine, exp)
    with db_session(engine) as db:
        runs = db.exec(select(Run).where(Run.experiment_id == exp.id).order_by(col(Run.repetition))).all()
        keys = {i.id: i.key for i in db.exec(
            select(Instance).where(col(Instance.id).in_({i for r in runs for i in r.instance_order}))).all()}
        runs_meta = [
            {"repetition": r.repetition, "seed": r.seed, "status": r.status, "note": r.note,
             "instance_order": [keys.get(i, str(i)) for i in r.instance_order]}
            for r in runs
        ]
    files = {}
    try:
        for name in TABLES:
            path = out / f"{name}.{fmt}"
            _write(path, tables[name], fmt, _COLUMNS[name])
            files[name] = path
        meta = {
            "name": exp.name,
            "task": exp.task,
            "mode": exp.mode,
            "status": exp.status,
            "n": exp.n,
            "k": exp.k,
            "config": exp.config,
            "runs": runs_meta,
            "created_at": _iso(exp.created_at),
            "exported_at": utcnow().isoformat(),
            "exported_by": f"pxp {__version__}",
            "format": fmt,
            "files": {name: f"{name}.{fmt}" for name in TABLES},
            "columns": _COLUMNS,
        }
        (out / "experiment.json").write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as e:
        raise ExportError(f"cannot write into {out}: {e.strerror}") from None
    files["experiment"] = out / "experiment.json"
    return Exported(out, files, {name: len(tables[name]) for name in TABLES})
