"""A transcripts import's sessions, each with its checked lines, and the sessions stored (DESIGN §6;
docs/development.md "Imports at dataset scale").

A file whose sessions each have their lines together is stored as it is read (`Seen` notices a session
met again); otherwise the checked lines wait in a temporary table (`STAGE`) and `staged_sessions` reads
them back in the order each session first appears, as plain tuples. `Store` writes the sessions and their
messages in batches (no context rows: a transcript holds no agent's context C_j): the driver's own
`executemany` on SQLite (the session ids read back by their (run, ordinal) index), `COPY` on PostgreSQL (ids
drawn from the sequence first)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
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

from pxp.data.importers.sending import copy_rows
from pxp.data.importers.transcript_lines import Filed
from pxp.protocols.pxp.facts import Row
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.storage.batches import chunks
from pxp.storage.store import table_of
from pxp.storage.tables import Annotator, Dataset, Experiment, Instance, Run, Session, utcnow

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
#: the sessions met so far, as hashes of (repetition, session), when a file is stored as it is read
SEEN = Table("pxp_transcript_seen", _MD, Column("h", BigInteger), prefixes=["TEMPORARY"],
             postgresql_on_commit="DROP")
#: sessions stored at a time; more on PostgreSQL, where each batch's statements wait for the server in turn and
#: fewer, larger batches leave it idle less (docs/development.md, "Imports at dataset scale")
SESSIONS, SESSIONS_PG = 500, 2_000
#: sessions whose hashes `Seen` holds in memory; the others wait in `SEEN`
SEEN_KEPT = 5_000
#: instance ids a file stored as it is read keeps, so that a batch asks the database only for the instances it is the
#: first to name (emptied when full: a study names each instance in many sessions)
INSTANCE_IDS_KEPT = 50_000
_OTHER = {"machine": "human", "human": "machine"}
#: a session waiting for its batch to be stored: repetition, session, status, instance, annotator, instance id (None:
#: named by the batch), its settled messages, why it stopped
Waiting = tuple[int, str, str, str, str | None, int | None, tuple[Row, ...], str | None]


def sessions_per_batch(dialect: str) -> int:
    """Sessions stored at a time on a database of this dialect (SQLAlchemy's name)."""
    return SESSIONS_PG if dialect == "postgresql" else SESSIONS


class Staged:
    """One session's staged lines, checked together: a message number given twice, the status, one
    instance and one annotator. `msgs` are its messages as read, by j; `lines` their lines."""

    __slots__ = ("annotator", "instance", "instance_id", "lines", "msgs", "path", "rep", "sid", "status")

    def __init__(self, path: Path, rows: list[Any], problems: list[tuple[int, str]],
                 instance_id: int | None = None) -> None:
        # a stage row: line, rep, sid, j, sender, tag, prediction, explanation, match, agree, changed, status,
        # instance, annotator[, first line of the session, instance id]
        first = rows[0]
        self.rep, self.sid, self.status, self.instance, self.annotator = first[1], first[2], first[11], first[12], \
            first[13]
        self.instance_id = instance_id
        self.path = path
        found: list[tuple[int, Row, int]] = []
        seen: dict[int, int] = {}
        for (line, _, sid, j, sender, tag, pred, expl, m, a, c, status, instance, annotator, *_) in rows:
            if j is None:
                continue
            earlier = seen.setdefault(j, line)
            if earlier != line:
                problems.append((line, f"{path.name}:{line}: message {j} of session {sid} (repetition {self.rep}) "
                                       f"is also on line {earlier}"))
                continue
            found.append((j, (j, sender, tag, pred, expl, None if m is None else bool(m),
                              None if a is None else bool(a), None if c is None else bool(c)), line))
            if status not in ("finished", "aborted"):
                problems.append((line, f"{path.name}:{line}: status must be finished or aborted, got {status!r}"))
            if self.instance != instance:
                problems.append((line, f"{path.name}:{line}: session {sid} names two instances ({self.instance!r} "
                                       f"and {instance!r})"))
            if annotator is not None and self.annotator is not None and self.annotator != annotator:
                problems.append((line, f"{path.name}:{line}: session {sid} names two annotators "
                                       f"({self.annotator!r} and {annotator!r})"))
            elif self.annotator is None:
                self.annotator = annotator
        found.sort()  # by j (each j once here)
        self.msgs = [f[1] for f in found]
        self.lines = [f[2] for f in found]

    def filed(self) -> list[Filed]:
        """The messages as the protocol sees them, each with its file and line."""
        return [Filed(Msg(j, Sender(sender), Tag(tag), p, e, m, a, c), f"{self.path.name}:{line}")
                for (j, sender, tag, p, e, m, a, c), line in zip(self.msgs, self.lines, strict=True)]


def staged_sessions(conn: Connection, path: Path, ds_id: int | None,
                    problems: list[tuple[int, str]]) -> Iterator[Staged]:
    """The staged sessions one at a time, in the order they first appear in the file."""
    s = STAGE
    first = func.min(s.c.line).over(partition_by=(s.c.rep, s.c.sid))
    if conn.dialect.name == "postgresql":  # one sort of the lines there; a join by line added a second
        order = select_core(*s.c, first.label("first")).subquery()
        at, q = order.c.line, select_core(*order.c)
        src: Any = order
    else:  # SQLite sorts the narrow rows (line, its session's first line), then reads each line by its key:
        # sorting the whole lines, explanations and all, took half as long again
        order = select_core(s.c.line.label("at"), first.label("first")).subquery()
        at, q, src = order.c.at, select_core(*s.c, order.c.first).join(order, order.c.at == s.c.line), s
    if ds_id is not None:
        i = table_of(Instance)
        q = q.add_columns(i.c.id.label("instance_id")).outerjoin(
            i, and_(i.c.dataset_id == ds_id, i.c.key == src.c.instance))
    rows = conn.execute(q.order_by(order.c.first, at),
                        execution_options={"stream_results": True, "max_row_buffer": 1000})
    group: list[Any] = []
    for part in rows.partitions(1000):  # a thousand rows a fetch, not one
        for r in part:
            if group and r[14] != group[0][14]:
                yield Staged(path, group, problems, group[0][15] if ds_id is not None else None)
                group = []
            group.append(r)
    if group:
        yield Staged(path, group, problems, group[0][15] if ds_id is not None else None)


class Seen:
    """The sessions met so far in a file stored as it is read, as hashes of (repetition, session): the last
    SEEN_KEPT in memory, the earlier ones in the temporary table `SEEN`. `again` tells whether a session's lines
    are not together (or, rarely, two sessions share a hash: the import then goes through the stage too)."""

    def __init__(self, conn: Connection, writer: Callable[[Callable[[], None]], None]) -> None:
        self.conn, self.writer, self.kept, self.spilled = conn, writer, set[int](), False

    def met(self, rep: int, sid: str) -> bool:
        """Whether the session was met before (in memory); remembers it."""
        h = hash((rep, sid))
        if h in self.kept:
            return True
        self.kept.add(h)
        if len(self.kept) >= SEEN_KEPT:
            self._spill()
        return False

    def _spill(self) -> None:
        rows, first = [(h,) for h in self.kept], not self.spilled
        self.kept.clear()
        self.spilled = True
        self.writer(lambda: self._send(rows, first))

    def _send(self, rows: list[tuple[int]], first: bool) -> None:
        if first:
            SEEN.create(self.conn)
        if not rows:
            return
        if self.conn.dialect.name == "postgresql":
            copy_rows(self.conn, SEEN.name, "h", rows)
        else:
            self.conn.exec_driver_sql(f"INSERT INTO {SEEN.name} (h) VALUES (?)", rows)  # type: ignore[arg-type]

    def again(self) -> bool:
        """After the file, once the writer is done: whether a session met before was met again (those in `SEEN`
        are compared here)."""
        if not self.spilled:
            return False
        self._send([(h,) for h in self.kept], False)
        twice = select_core(SEEN.c.h).group_by(SEEN.c.h).having(func.count() > 1).limit(1)
        found = self.conn.execute(twice).first() is not None
        SEEN.drop(self.conn)
        return found


class Store:
    """Where the sessions go: the experiment, its runs, the annotators and the instances the file
    names, made from the staged lines (`staged`) or as the sessions come, each in the order of its first
    line; then sessions and messages in batches."""

    def __init__(self, db: DB, path: Path, name: str, task: str, n: int, k: int, *, staged: bool = True,
                 writer: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.db, self.conn, self.n, self.k, self.writer = db, db.connection(), n, k, writer
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
        self.exp_id = exp.id or 0
        self.runs: dict[int, int] = {}
        self.annotators: dict[str, int] = {}
        self.batch: list[Waiting] = []
        self.ordinals: dict[int, int] = defaultdict(int)
        self.pg = self.conn.dialect.name == "postgresql"
        self.per_batch = sessions_per_batch(self.conn.dialect.name)
        i = table_of(Instance)
        self.top = self.conn.execute(select_core(func.coalesce(func.max(i.c.ordinal), 0))
                                     .where(i.c.dataset_id == self.ds_id)).scalar_one()
        if not staged:  # made as the sessions come (`named`), their ids kept (`known`)
            self.named: dict[str, None] = {}
            self.known: dict[str, int] = {}
            return
        for rep in self.conn.execute(select_core(s.c.rep).group_by(s.c.rep).order_by(func.min(s.c.line))).scalars():
            self._run(rep)
        for ann in self.conn.execute(select_core(s.c.annotator).where(s.c.annotator.is_not(None))
                                     .group_by(s.c.annotator).order_by(func.min(s.c.line))).scalars():
            self._annotator(ann)
        self._instances()

    def _run(self, rep: int) -> None:
        run = Run(experiment_id=self.exp_id, repetition=rep, status="finished")
        self.db.add(run)
        self.db.flush()
        self.runs[rep] = run.id or 0

    def _annotator(self, name: str) -> None:
        row = self.db.exec(select(Annotator).where(Annotator.name == name)).first()
        if row is None:
            row = Annotator(name=name, role="imported")
            self.db.add(row)
            self.db.flush()
        self.annotators[name] = row.id or 0

    def _name(self, rep: int, instance: str, annotator: str | None) -> None:
        """The run and annotator a session's lines name, made now if new; its instance, kept for the batch (a file
        stored as it is read)."""
        if rep not in self.runs:
            self._run(rep)
        if annotator is not None and annotator not in self.annotators:
            self._annotator(annotator)
        self.named[instance] = None

    def _named_instances(self) -> dict[str, int]:
        """The ids of the instances the batch's lines name, those the dataset lacks made now, numbered in order
        of first mention."""
        known = self.known
        ids = {key: known[key] for key in self.named if key in known}
        if len(ids) < len(self.named):
            ids |= self._ids([key for key in self.named if key not in ids])
        new = [key for key in self.named if key not in ids]
        self.named = {}
        if new and self.pg:  # one statement, the ids returned (an insert a row, then a look-up, took 0.3 s a batch)
            ids |= dict(self.conn.exec_driver_sql(  # type: ignore[arg-type]
                "INSERT INTO instance (dataset_id, key, ordinal, payload, label, reference_prediction, "
                "reference_explanation, meta) SELECT %(ds)s, k.key, k.ordinal, '', '', '', '', '{}' "
                "FROM unnest(%(keys)s::text[], %(ordinals)s::int[]) AS k(key, ordinal) RETURNING key, id",
                {"ds": self.ds_id, "keys": new, "ordinals": list(range(self.top + 1, self.top + len(new) + 1))}).all())
            self.top += len(new)
        elif new:  # the driver's own executemany (SQLAlchemy's took 0.1-0.2 s of 5,000 instances' import)
            rows = [(self.ds_id, key, self.top + o) for o, key in enumerate(new, start=1)]
            self.top += len(new)
            self.conn.exec_driver_sql(  # type: ignore[arg-type]
                "INSERT INTO instance (dataset_id, key, ordinal, payload, label, reference_prediction, "
                "reference_explanation, meta) VALUES (?, ?, ?, '', '', '', '', '{}')", rows)
            ids |= self._ids(new)
        if len(known) + len(ids) > INSTANCE_IDS_KEPT:
            known.clear()
        known |= ids
        return ids

    def _ids(self, keys: list[str]) -> dict[str, int]:
        """The dataset's instances of these keys: their ids."""
        i, ids = table_of(Instance), dict[str, int]()
        for part in chunks(keys, 1000):
            if self.pg:  # the keys as one array, joined: each found by the (dataset, key) index whatever the plan
                # (`key = ANY($1)` under a prepared statement's generic plan compared every row with every key)
                found = self.conn.exec_driver_sql(
                    "SELECT i.key, i.id FROM unnest(%(keys)s::text[]) AS k(key) JOIN instance i "
                    "ON i.dataset_id = %(ds)s AND i.key = k.key", {"keys": part, "ds": self.ds_id}).all()
            else:
                found = self.conn.execute(select_core(i.c.key, i.c.id).where(
                    i.c.dataset_id == self.ds_id, i.c.key.in_(part))).all()  # bounded: a chunk
            ids |= dict(found)  # type: ignore[arg-type]
        return ids

    def _instances(self) -> None:
        """The instances the file names that the dataset lacks, numbered in order of first mention."""
        i, s, top = table_of(Instance), STAGE, self.top
        named = select_core(s.c.instance, func.min(s.c.line).label("first")).group_by(s.c.instance).subquery()
        meta = cast(literal("{}"), JSON) if self.conn.dialect.name == "postgresql" else literal("{}")
        rows = select_core(literal(self.ds_id), named.c.instance, literal(top) + func.row_number().over(
            order_by=named.c.first), literal(""), literal(""), literal(""), literal(""), meta).where(
            ~exists().where(i.c.dataset_id == self.ds_id, i.c.key == named.c.instance))
        self.conn.execute(insert(i).from_select(["dataset_id", "key", "ordinal", "payload", "label",
                                                 "reference_prediction", "reference_explanation", "meta"], rows))

    def add(self, one: Staged, msgs: Sequence[Row], stop: str | None) -> None:
        """A session to store: its settled messages and, if it is finished, why it stopped. Kept as a tuple of plain
        values (a `Waiting`), which the collector stops following, until its batch is sent."""
        self.batch.append((one.rep, one.sid, one.status, one.instance, one.annotator, one.instance_id, tuple(msgs),
                           stop))
        if len(self.batch) >= self.per_batch:
            self.finish()

    def finish(self) -> None:
        """Store the sessions waiting, with their messages: through `writer` if given (in its thread
        on PostgreSQL, while the next batch is read and checked)."""
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        if self.writer is None:
            self._store(batch)
        else:
            self.writer(lambda: self._store(batch))

    def _store(self, batch: list[Waiting]) -> None:
        now = utcnow()
        stamp: Any = now.isoformat()  # PostgreSQL: COPY sends text (psycopg took 0.35 s to format 130,000 datetimes)
        if not self.pg:  # as SQLAlchemy writes a DateTime to SQLite
            dt = table_of(Session).c.created_at.type
            to_text = dt.dialect_impl(self.conn.dialect).bind_processor(self.conn.dialect)
            stamp = to_text(now) if to_text is not None else now
        named: dict[str, int] = {}
        if hasattr(self, "named"):  # stored as read: the runs, annotators and instances the batch names
            for rep, _, _, instance, annotator, _, _, _ in batch:
                self._name(rep, instance, annotator)
            named = self._named_instances()
        rows = []
        for rep, sid, status, instance, annotator, instance_id, _, stop in batch:
            self.ordinals[rep] += 1
            rows.append((self.runs[rep], named[instance] if instance_id is None else instance_id, self.ordinals[rep],
                         self.n, self.k, status, stop, None, self.annotators.get(annotator or ""), True,
                         f"imported session {sid}", None, None, stamp, stamp))
        ids = self._sessions(rows)
        # the messages alone: the C table holds what an agent of pxp's saw at message j, and a transcript carries
        # none (docs/development.md, "Imports at dataset scale"); the file's session name is the session's note.
        # Made as they are sent on PostgreSQL, not held as a list.
        messages = ((session_id, j, sender, _OTHER[sender], tag, pred, expl, m, a, c, None, stamp)
                    for session_id, one in zip(ids, batch, strict=True)
                    for j, sender, tag, pred, expl, m, a, c in one[6])
        if self.pg:
            copy_rows(self.conn, "message", self._MESSAGE_COLS, messages)
        elif listed := list(messages):  # (none when every session of the batch ended before its first message)
            self.conn.exec_driver_sql(f"INSERT INTO message ({self._MESSAGE_COLS}) VALUES "
                                      f"({', '.join('?' * len(listed[0]))})", listed)  # type: ignore[arg-type]

    _MESSAGE_COLS = ("session_id, j, sender, receiver, tag, prediction, explanation, match, agree, changed, "
                     "llm_call_id, created_at")

    _SESSION_COLS = ("run_id, instance_id, ordinal, n, k, status, stop_reason, abort_reason, annotator_id, "
                     "context_kept, learn_note, learn_val_before, learn_val_after, created_at, updated_at")

    def _sessions(self, rows: list[tuple[Any, ...]]) -> list[int]:
        """Insert the session rows; their ids, in order."""
        if not self.pg:  # then each run's new sessions read back by their (run, ordinal) range, in order
            self.conn.exec_driver_sql(f"INSERT INTO session ({self._SESSION_COLS}) VALUES "
                                      f"({', '.join('?' for _ in rows[0])})", rows)
            sess_t = table_of(Session)
            by_run: dict[int, list[int]] = {}
            for r in rows:
                by_run.setdefault(r[0], []).append(r[2])
            ids: dict[tuple[int, int], int] = {}
            for run_id, ordinals in by_run.items():
                ids |= {(run_id, o): i for i, o in self.conn.execute(
                    select_core(sess_t.c.id, sess_t.c.ordinal).where(
                        sess_t.c.run_id == run_id, sess_t.c.ordinal.between(min(ordinals), max(ordinals))))}
            return [ids[r[0], r[2]] for r in rows]
        # ids drawn from the sequence, then COPY (RETURNING row by row is the slow part there)
        drawn = list(self.conn.exec_driver_sql(
            "SELECT nextval(pg_get_serial_sequence('session', 'id')) FROM generate_series(1, %(n)s)",
            {"n": len(rows)}).scalars())
        copy_rows(self.conn, "session", f"id, {self._SESSION_COLS}",
                  ([i, *r] for i, r in zip(drawn, rows, strict=True)))
        return drawn
