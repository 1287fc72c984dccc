"""`pxp export`: an experiment's blackboard Δ = {D, M, C}, its evaluations, calls and probes, as files, read through
SQLAlchemy Core without the ORM (docs/development.md, "Start-up").

Layout (one directory, `--out PATH`; EXT is jsonl, csv or parquet):

    experiment.json     name, task, mode, status, n, k, the full stored config, the repetitions
                        (seed, status, instance order by key), and the files and their columns
    sessions.EXT        D: one row per session — repetition, session, ordinal, instance (key),
                        split, status, stop_reason, abort_reason, annotator, context_kept,
                        learn_note, learn_val_before, learn_val_after, messages
    messages.EXT        M: one row per message — session, instance, repetition, j, sender,
                        receiver, tag, prediction, explanation, match, agree, changed, annotator,
                        status (of the session), created_at
    contexts.EXT        C: one row per message of a session pxp ran — repetition, session, j, content (JSON text in
                        csv/parquet); none for an imported experiment (a transcript holds no context)
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
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, String, cast, func, select

from pxp import __version__
from pxp.data.sinks import Sink
from pxp.llm.redact import accounting
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.common_ground import QUESTIONS
from pxp.storage import core_tables as ct
from pxp.storage.batches import chunks, page_rows, pages, run_pages
from pxp.storage.core import experiment_id_in

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


#: the Core tables (pxp.storage.core_tables: no ORM, docs/development.md "Start-up")
_S, _R, _I, _A, _M, _C, _P, _EV, _LC, _E = (ct.session, ct.run, ct.instance, ct.annotator, ct.message, ct.context,
                                            ct.probe, ct.evaluation, ct.llmcall, ct.experiment)
_RANK = {q: i for i, q in enumerate(QUESTIONS)}
_NO_MESSAGE = dict.fromkeys(("j", "sender", "receiver", "tag", "prediction", "explanation", "match", "agree",
                             "changed"))


def _session_rows(conn: Connection, rid: int, rep: int, page: list[Any], sinks: dict[str, Sink]) -> None:
    """The D, M, C and probe rows of one page of a run's sessions (ordinals in order), each table read by
    the page's ordinal range."""
    def read(t: Any, *cols: Any) -> list[Any]:
        return page_rows(conn, rid, page, t, *cols)

    msgs = read(_M, _M.c.session_id, _M.c.j, _M.c.sender, _M.c.receiver, _M.c.tag, _M.c.prediction,
                _M.c.explanation, _M.c.match, _M.c.agree, _M.c.changed, _M.c.created_at)
    counts = Counter(m.session_id for m in msgs)
    sinks["sessions"].write([
        {"repetition": rep, "session": s.id, "ordinal": s.ordinal, "instance": s.key, "split": s.split,
         "status": s.status, "stop_reason": s.stop_reason, "abort_reason": s.abort_reason, "annotator": s.annotator,
         "context_kept": s.context_kept, "learn_note": s.learn_note, "learn_val_before": s.learn_val_before,
         "learn_val_after": s.learn_val_after, "messages": counts[s.id]}
        for s in page])
    m_rows: list[dict[str, Any]] = []
    at = iter(msgs)
    m = next(at, None)
    for s in page:
        head = {"session": s.id, "instance": s.key, "repetition": rep}
        tail = {"annotator": s.annotator, "status": s.status}
        # an aborted session with no message (e.g. no parseable INIT) keeps one row, so that
        # `pxp import transcripts messages.jsonl` still counts it apart
        if s.status == "aborted" and not counts[s.id]:
            m_rows.append({**head, **_NO_MESSAGE, **tail, "created_at": _iso(s.created_at)})
        while m is not None and m.session_id == s.id:
            m_rows.append({**head, "j": m.j, "sender": m.sender, "receiver": m.receiver, "tag": m.tag,
                           "prediction": m.prediction, "explanation": m.explanation, "match": m.match,
                           "agree": m.agree, "changed": m.changed, **tail, "created_at": _iso(m.created_at)})
            m = next(at, None)
    sinks["messages"].write(m_rows)
    sinks["contexts"].write([{"repetition": rep, "session": c.session_id, "j": c.j, "content": c.content}
                             for c in read(_C, _C.c.session_id, _C.c.j, _C.c.content)])
    probes = read(_P, _P.c.session_id, _P.c.j, _P.c.question, _P.c.truth, _P.c.answer, _P.c.valid, _P.c.created_at)
    probes.sort(key=lambda p: (p.ordinal, p.j, _RANK.get(p.question, len(_RANK)), p.question))
    sinks["probes"].write([{"repetition": rep, "session": p.session_id, "j": p.j, "question": p.question,
                            "truth": p.truth, "answer": p.answer, "valid": p.valid, "created_at": _iso(p.created_at)}
                           for p in probes])


def write_tables(engine: Engine, experiment_id: int, sinks: dict[str, Sink]) -> list[dict[str, Any]]:
    """Write the D, M, C, evaluation, call and probe rows of one experiment into `sinks`, a page of
    sessions at a time (pxp.storage.batches); returns the repetitions' metadata for experiment.json."""
    sess = (select(_S.c.ordinal, _S.c.id, _S.c.status, _S.c.stop_reason, _S.c.abort_reason, _S.c.context_kept,
                   _S.c.learn_note, _S.c.learn_val_before, _S.c.learn_val_after, _S.c.created_at,
                   func.coalesce(_I.c.key, cast(_S.c.instance_id, String)).label("key"), _I.c.split,
                   _A.c.name.label("annotator"))
            .select_from(_S.outerjoin(_I, _I.c.id == _S.c.instance_id).outerjoin(_A, _A.c.id == _S.c.annotator_id)))
    meta = []
    with engine.connect() as conn:
        of_exp = select(_R).where(_R.c.experiment_id == experiment_id).order_by(_R.c.repetition)
        for r, page in run_pages(conn, of_exp, sess):
            _session_rows(conn, r.id, r.repetition, page, sinks)
            del page  # not held while the next page is read
        runs = list(conn.execute(of_exp))
        rep = {r.id: r.repetition for r in runs}
        for r in runs:
            evals = select(_EV.c.after_session, _EV.c.split, _EV.c.prediction_accuracy, _EV.c.explanation_accuracy,
                           _EV.c.both_accuracy, _EV.c.instances).where(_EV.c.run_id == r.id)
            for page in pages(conn, evals, _EV.c.after_session, _EV.c.split):
                sinks["evaluations"].write([{"repetition": r.repetition, **e._asdict()} for e in page])
            keys: dict[int, str] = {}
            for ids in chunks(dict.fromkeys(r.instance_order)):
                q = select(_I.c.id, _I.c.key).where(_I.c.id.in_(ids))  # bounded: a chunk of the run's order
                keys.update((i, k) for i, k in conn.execute(q))
            meta.append({"repetition": r.repetition, "seed": r.seed, "status": r.status, "note": r.note,
                         "instance_order": [keys.get(i, str(i)) for i in r.instance_order]})
        for page in pages(conn, select(_LC).where(_LC.c.experiment_id == experiment_id), _LC.c.id):
            sinks["calls"].write([{"repetition": rep.get(c.run_id) if c.run_id is not None else None,
                                   "session": c.session_id, "j": c.j, **accounting(c, CALL_FIELDS)} for c in page])
    return meta


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


#: the call-cost fields of a calls row: pxp.agents.base.CALL_FIELDS, named here so that an export loads no table class
#: (tests/analysis/test_export.py checks they are the same)
CALL_FIELDS = tuple(_COLUMNS["calls"][3:])


def export_experiment(engine: Engine, name_or_id: str, out: Path, fmt: str = "jsonl") -> Exported:
    """Write the experiment's tables into directory `out` in the layout above."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    with engine.connect() as conn:
        found = experiment_id_in(conn, name_or_id)
        exp = None if found is None else conn.execute(select(_E).where(_E.c.id == found)).first()
    if exp is None:
        raise ExportError(f"no experiment named {name_or_id!r}")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"cannot create {out}: {e.strerror}") from None
    files = {name: out / f"{name}.{fmt}" for name in TABLES}
    sinks: dict[str, Sink] = {}
    try:
        try:
            for name in TABLES:
                sinks[name] = Sink(files[name], fmt, _COLUMNS[name])
            runs_meta = write_tables(engine, exp.id, sinks)
        finally:
            for sink in sinks.values():
                sink.close()
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
            "exported_at": datetime.now(UTC).isoformat(),
            "exported_by": f"pxp {__version__}",
            "format": fmt,
            "files": {name: f"{name}.{fmt}" for name in TABLES},
            "columns": _COLUMNS,
        }
        (out / "experiment.json").write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as e:
        raise ExportError(f"cannot write into {out}: {e.strerror}") from None
    files["experiment"] = out / "experiment.json"
    return Exported(out, files, {name: sinks[name].rows for name in TABLES})
