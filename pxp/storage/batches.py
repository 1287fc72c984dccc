"""Reading a study in bounded pieces (docs/development.md, "Reading a study"): keyset pages of rows,
each page one statement, and lists of values cut into chunks, so that no statement binds one
parameter per stored row and memory does not grow with the study.

Pages join the Core `session` of pxp.storage.core_tables (no ORM: docs/development.md, "Start-up"), so the
statements given to them name that copy's tables too: a table class's `session` beside it would be a second
table of one name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, Table, select, tuple_
from sqlalchemy.sql.elements import ColumnElement

from pxp.storage.core_tables import session as _S

#: rows per page, values per chunk: a statement's parameters and a page's objects stay this small
BATCH = 1000
T = TypeVar("T")


def pages(conn: Connection, q: Select[Any], *key: ColumnElement[Any], size: int = BATCH) -> Iterator[list[Row[Any]]]:
    """The rows of `q` in pages of at most `size`, in the order of `key` (one column or several, unique
    among q's rows and q's first columns); each page is one statement (`key > last`, ORDER BY key,
    LIMIT size)."""
    last: Sequence[Any] | None = None
    while True:
        stmt = q
        if last is not None:
            stmt = q.where(key[0] > last[0] if len(key) == 1 else tuple_(*key) > tuple_(*last))
        rows = list(conn.execute(stmt.order_by(*key).limit(size)).all())
        if not rows:
            return
        last, full = tuple(rows[-1][:len(key)]), len(rows) == size
        yield rows
        del rows  # not held while the next page is read
        if not full:
            return


def chunks(values: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    """`values` in lists of at most `size`: an IN list bounded per statement."""
    out: list[T] = []
    for v in values:
        out.append(v)
        if len(out) == size:
            yield out
            out = []
    if out:
        yield out


def run_pages(conn: Connection, runs: Select[Any], sessions: Select[Any],
              size: int = BATCH) -> Iterator[tuple[Row[Any], list[Row[Any]]]]:
    """For each run of `runs` (rows with an `id`), in order, its sessions of `sessions` (whose first column
    is session.ordinal) in pages by ordinal: each page one range of the unique (run, ordinal) index."""
    for run in list(conn.execute(runs)):
        for page in pages(conn, sessions.where(_S.c.run_id == run.id), _S.c.ordinal, size=size):
            yield run, page
            del page  # not held while the next page is read


def page_rows(conn: Connection, run_id: int, page: list[Row[Any]], table: Table, *cols: Any) -> list[Row[Any]]:
    """The rows of `table` (with session_id and j) of a page of `run_pages`, by session ordinal then j, in one
    statement over the page's ordinal range; each row's first column is its session's ordinal."""
    return list(conn.execute(
        select(_S.c.ordinal, *cols).select_from(table.join(_S, _S.c.id == table.c.session_id))
        .where(_S.c.run_id == run_id, _S.c.ordinal.between(page[0].ordinal, page[-1].ordinal))
        .order_by(_S.c.ordinal, table.c.j)).all())  # fetchall: one driver call, not one a row
