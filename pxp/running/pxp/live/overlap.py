"""Overlap studies: per-annotator case lists and progress (docs/research.md, Live experiments and overlap).

The papers' uncontrolled experiments had two chemists (h1, h2) annotate the same molecules:
one live experiment with overlap 2. A case list (CSV with the columns annotator and
instance) says which cases each annotator may be served; progress is counted per annotator
from the sessions and the claims.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from sqlalchemy import Engine, func
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.running.pxp.live.assignment import LiveError, live_run, overlap_of
from pxp.storage.tables import Annotator, Session

MAX_ROWS = 200_000


def parse_case_lists(text: str) -> dict[str, list[str]]:
    """Case lists from CSV text with a header naming the columns `annotator` and `instance`
    (the instance's key); other columns are ignored. LiveError (one line) for a bad file."""
    text = text.lstrip("\ufeff")
    try:
        rows = csv.DictReader(io.StringIO(text))
        fields = [f.strip().lower() for f in rows.fieldnames or []]
        if "annotator" not in fields or "instance" not in fields:
            raise LiveError("the case list needs a header with the columns annotator and instance")
        rows.fieldnames = fields
        out: dict[str, list[str]] = {}
        for line, row in enumerate(rows, start=2):
            if line > MAX_ROWS:
                raise LiveError(f"the case list has more than {MAX_ROWS:,} rows")
            who = " ".join(str(row.get("annotator") or "").split())
            key = str(row.get("instance") or "").strip()
            if not who and not key:
                continue  # a blank line
            if not who or not key:
                raise LiveError(f"line {line} of the case list needs both an annotator and an instance")
            if len(who) > 200:
                raise LiveError(f"line {line} of the case list: the annotator name is too long")
            keys = out.setdefault(who, [])
            if key not in keys:
                keys.append(key)
    except csv.Error as err:
        raise LiveError(f"the case list is not valid CSV: {err}") from None
    if not out:
        raise LiveError("the case list has no rows")
    return out


@dataclass(frozen=True)
class AnnotatorProgress:
    """One annotator's work in a live experiment."""

    annotator: str
    finished: int
    aborted: int
    open: int
    #: the cases this annotator may be served: their case list, else every case
    cases: int

    @property
    def done(self) -> int:
        return self.finished + self.aborted


def annotator_progress(engine: Engine, experiment_id: int) -> list[AnnotatorProgress]:
    """Per-annotator progress (by name), with listed annotators who have not started yet."""
    with DB(engine) as db:
        exp, run = live_run(db, experiment_id)
        counts: dict[str, dict[str, int]] = {}
        for name, status, c in db.exec(
            select(Annotator.name, Session.status, func.count())
            .join(Annotator, col(Annotator.id) == col(Session.annotator_id))
            .where(Session.run_id == run.id)
            .group_by(Annotator.name, Session.status)
        ).all():
            counts.setdefault(name, {})[status] = int(c)
        lists: dict[str, list[int]] = dict(exp.config.get("case_lists") or {})
        total = len(run.instance_order)
    out = []
    for name in sorted(set(counts) | set(lists)):
        got = counts.get(name, {})
        cases = len(lists.get(name, [])) if lists else total
        out.append(AnnotatorProgress(name, got.get("finished", 0), got.get("aborted", 0), got.get("open", 0),
                                     cases))
    return out


def overlap_summary(engine: Engine, experiment_id: int) -> tuple[int, int]:
    """(overlap k, cases done by k annotators) of a live experiment."""
    with DB(engine) as db:
        exp, run = live_run(db, experiment_id)
        k = overlap_of(exp)
        per_case = db.exec(
            select(Session.instance_id, func.count())
            .where(Session.run_id == run.id, Session.status != "open")
            .group_by(col(Session.instance_id))
        ).all()
    return k, sum(1 for _, c in per_case if int(c) >= k)


def read_case_lists(data: bytes) -> dict[str, list[str]]:
    """Case lists from an uploaded CSV file's bytes (UTF-8); LiveError (one line) for a bad file."""
    try:
        return parse_case_lists(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise LiveError("the case list is not UTF-8 text") from None
