"""Import transcripts (JSONL, one message per line) as an experiment (DESIGN §6).

Fields: session, instance, j, sender (machine|human), tag (any case), prediction,
explanation; optional match, agree, changed, repetition, annotator, status (finished, the
default, or aborted: a session that ended before its stop rule, e.g. on a format failure).
Each value is checked for its JSON type (pxp.data.importers.transcript_lines); match and changed are
computed from the content, and a file's own columns are refused where they contradict it.
`annotator` names who played the human (one name per session); cases several annotators saw
are compared by pxp.analysis.agreement (docs/research.md, Agreement).
The file is read once, a line at a time, each line checked and staged in a temporary table; the
sessions are then read back one at a time in the order they first appear, checked whole and stored
with Core bulk inserts (COPY on PostgreSQL), so memory does not grow with the file (docs/development.md
"Imports at dataset scale"). One transaction: non-conformant sessions are refused with their
violations unless allowed, and any problem leaves the database as it was.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    cast,
    exists,
    func,
    insert,
    literal,
)
from sqlalchemy import select as select_core
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.importers.common import ImportProblems, Problems, problem_count
from pxp.data.importers.jsonl import iter_objects
from pxp.data.importers.sending import Stager, copy_rows, whole_tables
from pxp.data.importers.transcript_lines import Filed, Line, check_prediction, settle_facts
from pxp.data.match import STUDY_LABELS, content_match, task_match_kind
from pxp.protocols.pxp.rules import (
    Msg,
    ProtocolError,
    Sender,
    Tag,
    conformance,
    missing_reason,
    session_bounds,
    stop_reason,
)
from pxp.protocols.text import TextRefused, identity
from pxp.storage.store import db_session, experiment_name_taken, table_of
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


_MD = MetaData()
#: a transcript's checked lines, one row each (j NULL: a session aborted before its first message)
STAGE = Table(
    "pxp_transcript_stage", _MD,
    Column("line", Integer, primary_key=True, autoincrement=False), Column("rep", Integer),
    Column("sid", String), Column("j", Integer), Column("sender", String), Column("tag", String),
    Column("prediction", Text), Column("explanation", Text), Column("match", Integer), Column("agree", Integer),
    Column("changed", Integer), Column("status", String), Column("instance", String), Column("annotator", String),
    prefixes=["TEMPORARY"], postgresql_on_commit="DROP",
)
#: lines staged at a time, sessions stored at a time
BATCH, SESSIONS = 5000, 500


def _flag(v: bool | None) -> int | None:
    return None if v is None else int(v)


def _check_line(lineno: int, rec: dict[str, Any], where: str, task: str,
                problems: list[tuple[int, str]]) -> tuple[Any, ...] | None:
    """One line checked on its own (fields, types, the text rule, the prediction): its stage row,
    or None with its problems (each with the line, for the order of the report)."""
    found: list[str] = []
    line = Line(rec, where, found)
    unknown = [k for k in rec if k not in FIELDS]
    missing = [f for f in REQUIRED if rec.get(f) in (None, "")]
    row: tuple[Any, ...] | None = None
    if unknown:
        found.append(f"{where}: unknown field {', '.join(repr(k) for k in unknown)}; a transcript line "
                     f"has {', '.join(FIELDS)}")
    elif set(missing) <= {"j", "sender", "tag"} and rec.get("status") == "aborted" and "j" in missing:
        # a session aborted before its first message: no message, counted apart
        sid, inst, rep = line.name("session"), line.name("instance"), line.whole("repetition", default=1)
        if sid is not None and inst is not None and rep is not None:
            row = (lineno, rep, sid, None, None, None, None, None, None, None, None, "aborted", inst,
                   _annotator(line))
    elif missing:
        found.append(f"{where}: missing {', '.join(missing)}; every message needs {', '.join(REQUIRED)}")
    else:
        row = _message_row(lineno, line, task)
    problems += [(lineno, p) for p in found]
    return row


def _message_row(lineno: int, line: Line, task: str) -> tuple[Any, ...] | None:
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
        line.problems.append(f"{line.where}: {err}")
    receiver = line.rec.get("receiver")
    if receiver is not None and sender is not None and receiver not in (sender.other.value, sender.other.value[0]):
        line.problems.append(f"{line.where}: receiver {receiver!r} is not the other agent ({sender.other.value})")
    if None in (sid, inst, j, rep, sender, tag, prediction, explanation, status):
        return None
    assert sender is not None and tag is not None and prediction is not None
    if (why := check_prediction(prediction, task, STUDY_LABELS if task == "rad" else ())) is not None:
        line.problems.append(f"{line.where}: {why}")
    if (why := missing_reason(tag, explanation or "")) is not None:  # a disagreement carries its reason
        line.problems.append(f"{line.where}: {why}")
    return (lineno, rep, sid, j, sender.value, tag.value, prediction, explanation, *map(_flag, facts), status,
            inst, ann)


class _Session:
    """One session's staged lines, checked together as read_transcripts did: a message number
    given twice, the status, one instance and one annotator."""

    def __init__(self, path: Path, rows: list[Any], problems: list[tuple[int, str]]) -> None:
        first = rows[0]
        self.rep, self.sid, self.instance_id = first.rep, first.sid, getattr(first, "instance_id", None)
        self.instance, self.annotator, self.status = first.instance, first.annotator, first.status
        self.filed: list[Filed] = []
        seen: dict[int, int] = {}
        for r in rows:
            where = f"{path.name}:{r.line}"
            if r.j is None:
                continue
            earlier = seen.setdefault(r.j, r.line)
            if earlier != r.line:
                problems.append((r.line, f"{where}: message {r.j} of session {r.sid} (repetition {r.rep}) is also "
                                         f"on line {earlier}"))
                continue
            self.filed.append(Filed(Msg(r.j, Sender(r.sender), Tag(r.tag), r.prediction, r.explanation,
                                        *(None if f is None else bool(f) for f in (r.match, r.agree, r.changed))),
                                    where))
            if r.status not in ("finished", "aborted"):
                problems.append((r.line, f"{where}: status must be finished or aborted, got {r.status!r}"))
            if self.instance != r.instance:
                problems.append((r.line, f"{where}: session {r.sid} names two instances ({self.instance!r} and "
                                         f"{r.instance!r})"))
            if r.annotator is not None and self.annotator is not None and self.annotator != r.annotator:
                problems.append((r.line, f"{where}: session {r.sid} names two annotators ({self.annotator!r} and "
                                         f"{r.annotator!r})"))
            elif self.annotator is None:
                self.annotator = r.annotator
        self.filed.sort(key=lambda f: f.msg.j)


def _sessions(conn: Connection, path: Path, ds_id: int | None,
              problems: list[tuple[int, str]]) -> Iterator[_Session]:
    """The staged sessions one at a time, in the order they first appear in the file."""
    s = STAGE
    first = func.min(s.c.line).over(partition_by=(s.c.rep, s.c.sid)).label("first")
    cols: list[Any] = [*s.c, first]
    q = select_core(*cols)
    if ds_id is not None:
        i = table_of(Instance)
        q = select_core(*cols, i.c.id.label("instance_id")).outerjoin(
            i, and_(i.c.dataset_id == ds_id, i.c.key == s.c.instance))
    inner = q.subquery()
    rows = conn.execute(select_core(inner).order_by(inner.c.first, inner.c.line),
                        execution_options={"stream_results": True, "max_row_buffer": 1000})
    group: list[Any] = []
    for r in rows:
        if group and r.first != group[0].first:
            yield _Session(path, group, problems)
            group = []
        group.append(r)
    if group:
        yield _Session(path, group, problems)


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
    """Validate and store the transcripts as experiment `name` (mode "imported"), in one pass and
    one transaction (nothing is kept on any problem).

    The facts match and changed are computed from the content (a file's own columns must agree);
    n, k and the task are checked first.
    """
    bounds = session_bounds(n, k)
    try:
        name = identity(name, "the experiment's name").text
    except TextRefused as err:
        bounds.append(str(err))
    if task not in TASKS:
        bounds.append(f"--task: unknown task {task!r} for transcripts; use one of {', '.join(TASKS)}")
    if bounds:  # not a property of one session: --allow-nonconformant does not cover it
        raise ImportProblems(bounds)
    with db_session(engine) as db:
        conn = db.connection()
        stage = Stager(conn, stage=STAGE)
        problems: list[tuple[int, str]] = Problems()  # (line, problem): reported in the order of the file
        syntax: list[str] = []  # a line that is not one JSON object: reported alone
        batch: list[tuple[Any, ...]] = []
        for lineno, rec in iter_objects(path, syntax):
            row = _check_line(lineno, rec, f"{path.name}:{lineno}", task, problems)
            if row is not None and not syntax:  # staged even after a problem: its session is checked too
                batch.append(row)
                if len(batch) >= BATCH:
                    stage.send(batch)
                    batch = []
        if syntax:
            raise ImportProblems(syntax)
        stage.send(batch)
        whole_tables(conn)
        taken = experiment_name_taken(db, name)
        store = None if problems or taken else _Store(db, path, name, task, n, k)
        settled: list[str] = []
        bad: list[str] = []
        violations: list[str] = []
        match = content_match(task_match_kind(task))
        sessions = messages = 0
        for one in _sessions(conn, path, store.ds_id if store is not None else None, problems):
            if problems:
                store = None
                continue
            msgs = settle_facts(one.filed, k, match, settled, bad)
            violations += [f"session {one.sid} (repetition {one.rep}), {v}"
                           for v in conformance(msgs, n, k, status=one.status)]
            sessions += 1
            messages += len(msgs)
            if store is not None and not settled and (allow_nonconformant or not (bad or violations)):
                store.add(one, msgs)
        if problems:
            in_order = [p for _, p in sorted(problems, key=lambda lp: lp[0])]
            raise ImportProblems(in_order, problem_count(problems) - len(problems))
        if settled:
            raise ImportProblems(settled)
        bad += violations
        if bad and not allow_nonconformant:
            raise ImportProblems(bad)
        if store is None:  # the name is taken (any problem was reported above)
            raise ImportProblems([str(taken)])
        store.finish()
        stage.drop()
    return ImportedTranscripts(name, sessions, messages, bad)


class _Store:
    """Where the sessions go: the experiment, its runs, the annotators and the instances the file
    names, made from the staged lines; then sessions, messages and contexts in batches."""

    def __init__(self, db: DB, path: Path, name: str, task: str, n: int, k: int) -> None:
        self.conn, self.n, self.k = db.connection(), n, k
        s = STAGE
        ds_name = f"transcripts:{name}"
        ds = db.exec(select(Dataset).where(Dataset.name == ds_name)).first()
        if ds is None:
            ds = Dataset(name=ds_name, task=task, source=str(path), description=f"instances named in {path.name}")
            db.add(ds)
            db.flush()
        self.ds_id = int(ds.id or 0)
        exp = Experiment(name=name, task=task, mode="imported", status="finished", n=n, k=k,
                         config={"source": str(path), "n": n, "k": k, "task": task})
        db.add(exp)
        db.flush()
        self.runs: dict[int, int] = {}
        for rep in self.conn.execute(select_core(s.c.rep).group_by(s.c.rep).order_by(func.min(s.c.line))).scalars():
            run = Run(experiment_id=exp.id or 0, repetition=rep, status="finished")
            db.add(run)
            db.flush()
            self.runs[rep] = run.id or 0
        self.annotators: dict[str, int] = {}
        for ann in self.conn.execute(select_core(s.c.annotator).where(s.c.annotator.is_not(None))
                                     .group_by(s.c.annotator).order_by(func.min(s.c.line))).scalars():
            row = db.exec(select(Annotator).where(Annotator.name == ann)).first()
            if row is None:
                row = Annotator(name=ann, role="imported")
                db.add(row)
                db.flush()
            self.annotators[ann] = row.id or 0
        self._instances()
        self.batch: list[tuple[_Session, list[Msg]]] = []
        self.ordinals: dict[int, int] = defaultdict(int)
        self.pg = self.conn.dialect.name == "postgresql"

    def _instances(self) -> None:
        """The instances the file names that the dataset lacks, numbered in order of first mention."""
        i, s = table_of(Instance), STAGE
        top = self.conn.execute(select_core(func.coalesce(func.max(i.c.ordinal), 0))
                                .where(i.c.dataset_id == self.ds_id)).scalar_one()
        named = select_core(s.c.instance, func.min(s.c.line).label("first")).group_by(s.c.instance).subquery()
        meta = cast(literal("{}"), JSON) if self.conn.dialect.name == "postgresql" else literal("{}")
        rows = select_core(literal(self.ds_id), named.c.instance, literal(top) + func.row_number().over(
            order_by=named.c.first), literal(""), literal(""), literal(""), literal(""), meta).where(
            ~exists().where(i.c.dataset_id == self.ds_id, i.c.key == named.c.instance))
        self.conn.execute(insert(i).from_select(["dataset_id", "key", "ordinal", "payload", "label",
                                                 "reference_prediction", "reference_explanation", "meta"], rows))

    def add(self, one: _Session, msgs: list[Msg]) -> None:
        self.batch.append((one, msgs))
        if len(self.batch) >= SESSIONS:
            self.finish()

    def finish(self) -> None:
        """Store the sessions waiting, with their messages and contexts."""
        if not self.batch:
            return
        now = utcnow()
        rows = []
        for one, msgs in self.batch:
            self.ordinals[one.rep] += 1
            rows.append({"run_id": self.runs[one.rep], "instance_id": one.instance_id,
                         "ordinal": self.ordinals[one.rep], "n": self.n, "k": self.k, "status": one.status,
                         "stop_reason": stop_reason(msgs, self.n) if one.status == "finished" else None,
                         "abort_reason": None, "annotator_id": self.annotators.get(one.annotator or ""),
                         "context_kept": True, "learn_note": f"imported session {one.sid}", "learn_val_before": None,
                         "learn_val_after": None, "created_at": now, "updated_at": now})
        ids = self._sessions(rows)
        msg_rows: list[dict[str, Any]] = []
        ctx_rows: list[dict[str, Any]] = []
        for session_id, (one, msgs) in zip(ids, self.batch, strict=True):
            for m in msgs:
                msg_rows.append({"session_id": session_id, "j": m.j, "sender": m.sender.value,
                                 "receiver": m.sender.other.value, "tag": m.tag.value, "prediction": m.prediction,
                                 "explanation": m.explanation, "match": m.match, "agree": m.agree,
                                 "changed": m.changed, "llm_call_id": None, "created_at": now})
                ctx_rows.append({"session_id": session_id, "j": m.j,
                                 "content": {"imported": True, "session": one.sid}})
        for table, part in ((table_of(Message), msg_rows), (table_of(Context), ctx_rows)):
            if part and self.pg:
                copy_rows(self.conn, f'"{table.name}"', ", ".join(part[0]),
                          ([json.dumps(v) if isinstance(v, dict) else v for v in r.values()] for r in part))
            elif part:
                self.conn.execute(insert(table), part)
        self.batch = []

    def _sessions(self, rows: list[dict[str, Any]]) -> list[int]:
        """Insert the session rows; their ids, in order."""
        sess_t = table_of(Session)
        if not self.pg:
            return list(self.conn.execute(insert(sess_t).returning(sess_t.c.id, sort_by_parameter_order=True),
                                          rows).scalars())
        # ids drawn from the sequence, then COPY (RETURNING row by row is the slow part there)
        ids = list(self.conn.exec_driver_sql(
            "SELECT nextval(pg_get_serial_sequence('session', 'id')) FROM generate_series(1, %(n)s)",
            {"n": len(rows)}).scalars())
        copy_rows(self.conn, "session", ", ".join(["id", *rows[0]]),
                  ([i, *r.values()] for i, r in zip(ids, rows, strict=True)))
        return ids
