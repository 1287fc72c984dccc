"""Import transcripts (JSONL, one message per line) as an experiment (DESIGN §6).

Fields: session, instance, j, sender (machine|human), tag (any case), prediction,
explanation; optional match, agree, changed, repetition, annotator, status (finished, the
default, or aborted: a session that ended before its stop rule, e.g. on a format failure).
Each value is checked for its JSON type (pxp.data.importers.transcript_lines); match and changed are
computed from the content, and a file's own columns are refused where they contradict it.
`annotator` names who played the human (one name per session); cases several annotators saw
are compared by pxp.analysis.agreement (docs/research.md, Agreement).
The file is read a line at a time, each line checked; when each session's lines are together, each
session is checked whole as its last line comes and stored in batches (pxp.data.importers.transcript_store).
A session met again rolls that back, and the file is read again through a temporary table (the stage),
whose sessions are read back one at a time in the order they first appear: the same checks, the same
problems in the same words. Memory does not grow with the file; a session whose conformance key settled
before with nothing to report is stored from that key (docs/development.md "Imports at dataset scale").
One transaction: non-conformant sessions are refused with their violations unless allowed, and any
problem leaves the database as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from pxp.data.importers.common import ImportProblems, Problems, problem_count
from pxp.data.importers.jsonl import iter_objects
from pxp.data.importers.limits import MAX_TEXT_CHARS
from pxp.data.importers.sending import Stager, Writer, whole_tables
from pxp.data.importers.transcript_lines import (
    PASSED,
    Line,
    check_prediction,
    passed_name,
    settle_facts,
    settled_rows,
)
from pxp.data.importers.transcript_store import STAGE, Seen, Staged, Store, staged_sessions
from pxp.data.match import STUDY_LABELS, content_match, task_match_kind
from pxp.protocols.pxp.facts import Row, Vouched, conformance_key, remembered
from pxp.protocols.pxp.rules import (
    ProtocolError,
    Sender,
    Tag,
    conformance,
    lacks_reason,
    missing_reason,
    session_bounds,
    stop_reason,
)
from pxp.protocols.text import TextRefused, clean_text, identity
from pxp.storage.store import db_session, experiment_name_taken

REQUIRED = ("session", "instance", "j", "sender", "tag")
#: every field a transcript line may have (pxp export writes receiver and created_at too)
FIELDS = (*REQUIRED, "prediction", "explanation", "match", "agree", "changed", "repetition", "annotator", "status",
          "receiver", "created_at")
_KNOWN = frozenset(FIELDS)


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


#: lines staged at a time
BATCH = 5000
#: messages of the sessions whose conformance keys are remembered, characters of the predictions whose MATCH is
KEY_MESSAGES, MATCH_CHARS = 50_000, 2_000_000


#: a fact as the stage holds it (an integer column on both databases)
_FLAG: dict[bool | None, int | None] = {None: None, False: 0, True: 1}


#: the senders and tags as a file usually writes them (after the text rule), and the receivers each may name
_SENDERS, _TAGS = {s.value: s for s in Sender}, {t.value: t for t in Tag}
_RECEIVERS = {s.value: (s.other.value, s.other.value[0]) for s in Sender}


def _plain_row(lineno: int, rec: dict[str, Any], task: str) -> tuple[Any, ...] | None:
    """The stage row of the usual line, checked as `_message_row` checks it: known fields of their JSON types,
    short values the text rule has passed before (`PASSED`), the sender and tag as `parse` gives them, an
    explanation the text rule leaves as it is, nothing to say about the prediction or the reason. None for any
    other line, which is then checked field by field (and its problems named)."""
    get: Any = rec.get  # (a value of any JSON type)
    ann: Any = get("annotator")
    j, rep, explanation = get("j"), get("repetition", 1), get("explanation", "")
    if type(j) is not int or type(rep) is not int or j < 1 or rep < 1 or type(explanation) is not str \
            or not _KNOWN.issuperset(rec):
        return None
    named: list[str | None]
    try:  # each a value the rule has passed before (not a string, or one not seen: below)
        named = [PASSED[get("session")], PASSED[get("instance")], PASSED[get("sender")], PASSED[get("tag")],
                 PASSED[get("prediction", "")], PASSED[get("status", "finished")]]
        if ann is not None:
            ann = PASSED[ann]
    except (KeyError, TypeError):
        raw = (get("session"), get("instance"), get("sender"), get("tag"), get("prediction", ""),
               get("status", "finished"))
        if not all(type(v) is str for v in raw) or (ann is not None and type(ann) is not str):
            return None
        named = [passed_name(v) for v in raw]
        if ann is not None and (ann := passed_name(ann)) is None:
            return None
    sid, inst, sender, tag, prediction, status = named
    match, agree, changed = get("match"), get("agree"), get("changed")
    if (not sid or not inst or sender is None or sender not in _SENDERS or tag is None or tag not in _TAGS
            or prediction is None or status is None
            or (ann is not None and not (type(ann) is str and ann)) or len(explanation) > MAX_TEXT_CHARS
            or (match is not None and type(match) is not bool) or (agree is not None and type(agree) is not bool)
            or (changed is not None and type(changed) is not bool)):
        return None
    if (receiver := get("receiver")) is not None and receiver not in _RECEIVERS[sender]:
        return None
    try:
        explanation = clean_text(explanation)
    except TextRefused:
        return None
    if lacks_reason(tag, explanation) or (
            task != "text" and check_prediction(prediction, task, STUDY_LABELS if task == "rad" else ()) is not None):
        return None
    return (lineno, rep, sid, j, sender, tag, prediction, explanation, _FLAG[match], _FLAG[agree], _FLAG[changed],
            status, inst, ann)


def _check_line(lineno: int, rec: dict[str, Any], where: str, task: str,
                problems: list[tuple[int, str]]) -> tuple[Any, ...] | None:
    """One line checked on its own (fields, types, the text rule, the prediction): its stage row,
    or None with its problems (each with the line, for the order of the report). `_plain_row` first: it
    passes the usual line sooner."""
    found: list[str] = []
    line = Line(rec, where, found)
    unknown = [k for k in rec if k not in _KNOWN]
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
    return (lineno, rep, sid, j, sender.value, tag.value, prediction, explanation, *(_FLAG[f] for f in facts), status,
            inst, ann)


class _Interleaved(Exception):
    """A session's lines are not together: the import is rolled back and done again through the stage."""


class _Sessions:
    """The sessions checked whole in the order they first appear (facts from the content, conformance), and
    stored; a session whose conformance key settled before with nothing to report is stored from that key."""

    def __init__(self, n: int, k: int, task: str, allow_nonconformant: bool) -> None:
        self.n, self.k, self.task, self.allow = n, k, task, allow_nonconformant
        # each an error's lines (the first KEPT_PROBLEMS of them kept) unless the sessions are stored with theirs
        self.settled: list[str] = Problems()
        self.bad: list[str] = [] if allow_nonconformant else Problems()
        self.violations: list[str] = [] if allow_nonconformant else Problems()
        self.match = remembered(content_match(task_match_kind(task)), MATCH_CHARS)
        #: sessions that settled clean: why they stopped
        self.vouched: Vouched[tuple[str | None]] = Vouched(KEY_MESSAGES)
        self.sessions = self.messages = 0

    def take(self, one: Staged, store: Store | None) -> None:
        n, k = self.n, self.k
        key = conformance_key(one.msgs, n, k, one.status, self.match)
        if (stop := self.vouched.get(key)) is not None:
            msgs: list[Row] = settled_rows(one.msgs, key)
        else:
            before = self._found()
            found = settle_facts(one.filed(), k, self.match, self.settled, self.bad)
            self.violations += [f"session {one.sid} (repetition {one.rep}), {v}"
                                for v in conformance(found, n, k, status=one.status)]
            msgs = [(m.j, m.sender.value, m.tag.value, m.prediction, m.explanation, m.match, m.agree, m.changed)
                    for m in found]
            stop = (stop_reason(found, n) if one.status == "finished" else None,)
            if before == self._found():
                self.vouched.put(key, stop)
        self.sessions += 1
        self.messages += len(msgs)
        if store is not None and not self.settled and (self.allow or not (self.bad or self.violations)):
            store.add(one, msgs, stop[0])

    def _found(self) -> int:
        return sum(problem_count(found) for found in (self.settled, self.bad, self.violations))

    def finish(self, problems: list[tuple[int, str]], store: Store | None, taken: str | None,
               name: str) -> ImportedTranscripts:
        """Every problem, in the order of the file, else the sessions' own, else the name's; or the result."""
        if problems:
            in_order = [p for _, p in sorted(problems, key=lambda lp: lp[0])]
            raise ImportProblems(in_order, problem_count(problems) - len(problems))
        if self.settled:
            raise ImportProblems(self.settled)
        bad = [*self.bad, *self.violations]
        if bad and not self.allow:
            raise ImportProblems(bad, problem_count(self.bad) + problem_count(self.violations) - len(bad))
        if store is None:  # the name is taken (any problem was reported above)
            raise ImportProblems([str(taken)])
        return ImportedTranscripts(name, self.sessions, self.messages, bad)


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
    n, k and the task are checked first. A file whose sessions each have their lines together is stored as
    it is read; when a session's lines turn out not to be, that is rolled back and the file read again
    through the stage.
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
    checks = (n, k, task, allow_nonconformant)
    try:
        return _as_read(engine, path, name, _Sessions(*checks))
    except _Interleaved:
        pass  # (not returned from here: the first attempt's frames would be kept while the stage runs)
    return _staged(engine, path, name, _Sessions(*checks))


def _as_read(engine: Engine, path: Path, name: str, check: _Sessions) -> ImportedTranscripts:
    """Each session checked and stored as its lines come (raises _Interleaved when they do not come together).
    A line's problems and a session's are kept apart, then reported as the stage reports them."""
    task = check.task
    with db_session(engine) as db:
        conn = db.connection()
        taken = experiment_name_taken(db, name)
        lines: Problems[tuple[int, str]] = Problems()
        whole: Problems[tuple[int, str]] = Problems()  # found checking a session's lines together
        syntax: list[str] = []
        with Writer(conn.dialect.name == "postgresql") as writer:
            store = None if taken else Store(db, path, name, task, check.n, check.k, staged=False, writer=writer)
            seen = Seen(conn, writer)
            store = _read(path, check, store, seen, lines, whole, syntax)
        if seen.again():
            raise _Interleaved
        problems = Problems([*lines, *whole], lines.more + whole.more)
        return check.finish(problems, store, taken, name)


def _read(path: Path, check: _Sessions, store: Store | None, seen: Seen, lines: list[tuple[int, str]],
          whole: list[tuple[int, str]], syntax: list[str]) -> Store | None:
    """The file read, each session checked and handed to `store` as its lines come, the last batch sent; the
    store, or None once there is a problem (nothing is stored then)."""
    group: list[tuple[Any, ...]] = []
    file, task = path.name, check.task
    for lineno, rec in iter_objects(path, syntax):
        row = _plain_row(lineno, rec, task) or _check_line(lineno, rec, f"{file}:{lineno}", task, lines)
        if row is None or syntax:
            continue
        if group and (row[2] != group[0][2] or row[1] != group[0][1]):
            store = _take(path, group, check, store, seen, lines, whole)
            group = []
        group.append(row)
    if syntax:
        raise ImportProblems(syntax)
    if group:
        store = _take(path, group, check, store, seen, lines, whole)
    if store is not None:
        store.finish()
    return store


def _take(path: Path, rows: list[tuple[Any, ...]], check: _Sessions, store: Store | None, seen: Seen,
          lines: list[tuple[int, str]], whole: list[tuple[int, str]]) -> Store | None:
    """One session's lines, checked together and whole, then handed to `store`; the store, or None."""
    if seen.met(rows[0][1], rows[0][2]):
        raise _Interleaved
    one = Staged(path, rows, whole)
    if lines or whole:  # nothing is stored: the sessions are only checked for their lines
        return None
    check.take(one, store)
    return store


def _staged(engine: Engine, path: Path, name: str, check: _Sessions) -> ImportedTranscripts:
    """Every line checked and staged, then the sessions read back one at a time and checked whole."""
    task = check.task
    with db_session(engine) as db:
        conn = db.connection()
        stage = Stager(conn, stage=STAGE)
        problems: list[tuple[int, str]] = Problems()  # (line, problem): reported in the order of the file
        syntax: list[str] = []  # a line that is not one JSON object: reported alone
        batch: list[tuple[Any, ...]] = []
        file = path.name
        for lineno, rec in iter_objects(path, syntax):
            row = _plain_row(lineno, rec, task) or _check_line(lineno, rec, f"{file}:{lineno}", task, problems)
            if row is not None and not syntax:  # staged even after a problem: its session is checked too
                batch.append(row)
                if len(batch) >= BATCH:
                    stage.send(batch)
                    batch = []
        if syntax:
            raise ImportProblems(syntax)
        stage.send(batch)
        whole_tables(conn)
        if conn.dialect.name == "postgresql":  # the read-back's sort of the stage, in memory (4 MB spilled to disk)
            conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")
        taken = experiment_name_taken(db, name)
        store = None if problems or taken else Store(db, path, name, task, check.n, check.k)
        for one in staged_sessions(conn, path, store.ds_id if store is not None else None, problems):
            if problems:
                store = None
                continue
            check.take(one, store)
        if store is not None:
            store.finish()
        done = check.finish(problems, store, taken, name)
        stage.drop()
    return done
