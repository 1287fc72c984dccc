"""Import transcripts (JSONL, one message per line) as an experiment (DESIGN §6).

Fields: session, instance, j, sender (machine|human), tag (any case), prediction,
explanation; optional match, agree, changed, repetition, annotator, status (finished, the
default, or aborted: a session that ended before its stop rule, e.g. on a format failure).
Each value is checked for its JSON type (pxp.data.importers.transcript_lines); match and changed are
computed from the content, and a file's own columns are refused where they contradict it.
`annotator` names who played the human (one name per session); cases several annotators saw
are compared by pxp.analysis.agreement (docs/research.md, Agreement).
Everything is validated before anything is written (then Core bulk inserts, COPY on PostgreSQL);
non-conformant sessions are refused with their violations unless allowed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, insert
from sqlalchemy import select as sa_select
from sqlmodel import select

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.jsonl import read_objects
from pxp.data.importers.transcript_lines import Filed, Line, check_prediction, settle_facts
from pxp.data.match import STUDY_LABELS, content_match, task_match_kind
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, Tag, conformance, session_bounds, stop_reason
from pxp.storage.store import db_session
from pxp.storage.tables import Annotator, Context, Dataset, Experiment, Instance, Message, Run, Session, utcnow

REQUIRED = ("session", "instance", "j", "sender", "tag")
#: every field a transcript line may have (pxp export writes receiver and created_at too)
FIELDS = (*REQUIRED, "prediction", "explanation", "match", "agree", "changed", "repetition", "annotator", "status",
          "receiver", "created_at")


@dataclass
class ImportedTranscripts:
    experiment: str
    sessions: int
    messages: int
    nonconformant: list[str] = field(default_factory=list)


def _annotator(line: Line) -> str | None:
    """The line's annotator (who played the human; agreement compares them), or None."""
    if line.rec.get("annotator") is None:
        return None
    return line.name("annotator")


#: the tasks a transcript's instances may have (a custom task needs its dataset and config)
TASKS = ("rad", "drug", "text")


def read_transcripts(
    path: Path, *, task: str = "text", k: int = 3,
) -> tuple[dict[tuple[int, str], list[Msg]], dict[tuple[int, str], dict[str, Any]], list[str]]:
    """Parse and check the file: messages with their facts computed from the content, per-session
    info keyed by (rep, session), and the lines whose tag the content contradicts."""
    problems: list[str] = []
    filed: dict[tuple[int, str], list[Filed]] = defaultdict(list)
    info: dict[tuple[int, str], dict[str, Any]] = {}
    seen: dict[tuple[int, str, int], int] = {}  # (rep, session, j) -> its line; the store keys messages by (session, j)
    labels = STUDY_LABELS if task == "rad" else ()
    for lineno, rec in read_objects(path):
        where = f"{path.name}:{lineno}"
        line = Line(rec, where, problems)
        unknown = [k for k in rec if k not in FIELDS]
        if unknown:
            problems.append(f"{where}: unknown field {', '.join(repr(k) for k in unknown)}; a transcript line "
                            f"has {', '.join(FIELDS)}")
            continue
        missing = [f for f in REQUIRED if rec.get(f) in (None, "")]
        if set(missing) <= {"j", "sender", "tag"} and rec.get("status") == "aborted" and "j" in missing:
            # a session aborted before its first message: no message, counted apart
            sid, inst, rep = line.name("session"), line.name("instance"), line.whole("repetition", default=1)
            if sid is not None and inst is not None and rep is not None:
                filed.setdefault((rep, sid), [])
                info.setdefault((rep, sid), {"instance": inst, "annotator": _annotator(line),
                                             "status": "aborted"})
            continue
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}; every message needs "
                            f"{', '.join(REQUIRED)}")
            continue
        sid, inst = line.name("session"), line.name("instance")
        j, rep = line.whole("j"), line.whole("repetition", default=1)
        sender_text, tag_text = line.text("sender"), line.text("tag")
        prediction, explanation = line.text("prediction"), line.text("explanation")
        facts = [line.flag(f) for f in ("match", "agree", "changed")]
        status = line.text("status", default="finished")
        ann = _annotator(line)
        sender = tag = None
        try:
            sender = Sender.parse(sender_text) if sender_text is not None else None
            tag = Tag.parse(tag_text) if tag_text is not None else None
        except ProtocolError as err:
            problems.append(f"{where}: {err}")
        receiver = rec.get("receiver")
        if receiver is not None and sender is not None and receiver not in (sender.other.value, sender.other.value[0]):
            problems.append(f"{where}: receiver {receiver!r} is not the other agent ({sender.other.value})")
        if None in (sid, inst, j, rep, sender, tag, prediction, explanation, status):
            continue
        assert sid is not None and inst is not None and j is not None and rep is not None
        assert sender is not None and tag is not None and prediction is not None and explanation is not None
        if (why := check_prediction(prediction, task, labels)) is not None:
            problems.append(f"{where}: {why}")
        key = (rep, sid)
        first = seen.setdefault((rep, sid, j), lineno)
        if first != lineno:
            problems.append(f"{where}: message {j} of session {sid} (repetition {rep}) is also on line {first}")
            continue
        filed[key].append(Filed(Msg(j, sender, tag, prediction, explanation, *facts), where))
        i = info.setdefault(key, {"instance": inst, "annotator": ann, "status": status})
        if status not in ("finished", "aborted"):
            problems.append(f"{where}: status must be finished or aborted, got {status!r}")
        if i["instance"] != inst:
            problems.append(f"{where}: session {sid} names two instances ({i['instance']!r} and {inst!r})")
        if ann is not None and i["annotator"] is not None and i["annotator"] != ann:
            problems.append(f"{where}: session {sid} names two annotators "
                            f"({i['annotator']!r} and {ann!r})")
        elif i["annotator"] is None:
            i["annotator"] = ann
    if problems:
        raise ImportProblems(problems)
    match = content_match(task_match_kind(task))
    sessions: dict[tuple[int, str], list[Msg]] = {}
    nonconformant: list[str] = []
    for key, lines in filed.items():
        lines.sort(key=lambda f: f.msg.j)
        sessions[key] = settle_facts(lines, k, match, problems, nonconformant)
    if problems:
        raise ImportProblems(problems)
    return sessions, info, nonconformant


def import_transcripts(
    engine: Engine,
    path: Path,
    *,
    name: str,
    n: int,
    k: int,
    task: str = "text",
    allow_nonconformant: bool = False,
) -> ImportedTranscripts:
    """Validate then store the transcripts as experiment `name` (mode "imported").

    The facts match and changed are computed from the content (a file's own columns must agree);
    n, k and the task are checked first.
    """
    bounds = session_bounds(n, k)
    if task not in TASKS:
        bounds.append(f"--task: unknown task {task!r} for transcripts; use one of {', '.join(TASKS)}")
    if bounds:  # not a property of one session: --allow-nonconformant does not cover it
        raise ImportProblems(bounds)
    sessions, info, bad = read_transcripts(path, task=task, k=k)
    for (rep, sid), msgs in sessions.items():
        for v in conformance(msgs, n, k, status=info[(rep, sid)]["status"]):
            bad.append(f"session {sid} (repetition {rep}), {v}")
    if bad and not allow_nonconformant:
        raise ImportProblems(bad)
    with db_session(engine) as db:
        if db.exec(select(Experiment).where(Experiment.name == name)).first() is not None:
            raise ImportProblems([f"an experiment named {name!r} already exists"])
        ds_name = f"transcripts:{name}"
        ds = db.exec(select(Dataset).where(Dataset.name == ds_name)).first()
        if ds is None:
            ds = Dataset(name=ds_name, task=task, source=str(path), description=f"instances named in {path.name}")
            db.add(ds)
            db.flush()
        exp = Experiment(
            name=name,
            task=task,
            mode="imported",
            status="finished",
            n=n,
            k=k,
            config={"source": str(path), "n": n, "k": k, "task": task},
        )
        db.add(exp)
        db.flush()
        runs: dict[int, int] = {}
        for rep in dict.fromkeys(rep for rep, _ in sessions):
            run = Run(experiment_id=exp.id or 0, repetition=rep, status="finished")
            db.add(run)
            db.flush()
            runs[rep] = run.id or 0
        annotators: dict[str, int] = {}
        for ann in dict.fromkeys(str(i["annotator"]) for i in info.values() if i.get("annotator")):
            row = db.exec(select(Annotator).where(Annotator.name == ann)).first()
            if row is None:
                row = Annotator(name=ann, role="imported")
                db.add(row)
                db.flush()
            annotators[ann] = row.id or 0
        count = _store_sessions(db.connection(), ds.id or 0, sessions, info, runs, annotators, n, k)
    return ImportedTranscripts(name, len(sessions), count, bad)


def _chunks(rows: list[dict[str, Any]], size: int = 5000) -> Iterator[list[dict[str, Any]]]:
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def _store_sessions(conn: Connection, ds_id: int, sessions: dict[tuple[int, str], list[Msg]],
                    info: dict[tuple[int, str], dict[str, Any]], runs: dict[int, int],
                    annotators: dict[str, int], n: int, k: int) -> int:
    """The sessions, their messages and contexts (and the instances they name, if new) through
    Core bulk inserts; how many messages (docs/development.md "Imports at dataset scale")."""
    inst_t: Table = Instance.__table__  # type: ignore[attr-defined]
    sess_t: Table = Session.__table__  # type: ignore[attr-defined]
    instances = dict(conn.execute(sa_select(inst_t.c.key, inst_t.c.id).where(inst_t.c.dataset_id == ds_id)).all())
    new = list(dict.fromkeys(i["instance"] for i in info.values() if i["instance"] not in instances))
    for part in _chunks([{"dataset_id": ds_id, "key": key, "ordinal": len(instances) + o + 1, "split": None,
                          "asset_sha256": None, "payload": "", "label": "", "reference_prediction": "",
                          "reference_explanation": "", "meta": {}} for o, key in enumerate(new)]):
        conn.execute(insert(inst_t), part)
    if new:
        instances = dict(conn.execute(sa_select(inst_t.c.key, inst_t.c.id)
                                      .where(inst_t.c.dataset_id == ds_id)).all())
    now = utcnow()
    ordinals: dict[int, int] = defaultdict(int)
    rows = []
    for (rep, sid), msgs in sessions.items():
        i = info[(rep, sid)]
        ordinals[rep] += 1
        rows.append({"run_id": runs[rep], "instance_id": instances[i["instance"]], "ordinal": ordinals[rep],
                     "n": n, "k": k, "status": i["status"],
                     "stop_reason": stop_reason(msgs, n) if i["status"] == "finished" else None,
                     "abort_reason": None, "annotator_id": annotators.get(str(i.get("annotator") or "")),
                     "context_kept": True, "learn_note": f"imported session {sid}", "learn_val_before": None,
                     "learn_val_after": None, "created_at": now, "updated_at": now})
    pg = conn.dialect.name == "postgresql"
    ids: list[int] = []
    if pg:  # ids drawn from the sequence, then COPY (RETURNING row by row is the slow part there)
        ids = list(conn.exec_driver_sql(
            "SELECT nextval(pg_get_serial_sequence('session', 'id')) FROM generate_series(1, %(n)s)",
            {"n": len(rows)}).scalars())
        _copy(conn, "session", ["id", *rows[0]], ([i, *r.values()] for i, r in zip(ids, rows, strict=True)))
        rows = []
    for part in _chunks(rows):
        ids += conn.execute(insert(sess_t).returning(sess_t.c.id, sort_by_parameter_order=True), part).scalars()
    count = 0
    msg_rows: list[dict[str, Any]] = []
    ctx_rows: list[dict[str, Any]] = []
    for session_id, ((_, sid), msgs) in zip(ids, sessions.items(), strict=True):
        for m in msgs:
            msg_rows.append({"session_id": session_id, "j": m.j, "sender": m.sender.value,
                             "receiver": m.sender.other.value, "tag": m.tag.value, "prediction": m.prediction,
                             "explanation": m.explanation, "match": m.match, "agree": m.agree,
                             "changed": m.changed, "llm_call_id": None, "created_at": now})
            ctx_rows.append({"session_id": session_id, "j": m.j, "content": {"imported": True, "session": sid}})
            count += 1
    msg_t: Table = Message.__table__  # type: ignore[attr-defined]
    ctx_t: Table = Context.__table__  # type: ignore[attr-defined]
    for table, all_rows in ((msg_t, msg_rows), (ctx_t, ctx_rows)):
        if pg and all_rows:
            _copy(conn, table.name, list(all_rows[0]),
                  ([json.dumps(v) if isinstance(v, dict) else v for v in r.values()] for r in all_rows))
            continue
        for part in _chunks(all_rows):
            conn.execute(insert(table), part)
    return count


def _copy(conn: Connection, table: str, columns: list[str], rows: Iterable[list[Any]]) -> None:
    """PostgreSQL COPY of `rows` into `table`, in the connection's transaction."""
    raw: Any = conn.connection.dbapi_connection
    with raw.cursor() as cur, cur.copy(f'COPY "{table}" ({", ".join(columns)}) FROM STDIN') as cp:
        for row in rows:
            cp.write_row(row)
