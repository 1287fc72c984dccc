"""Reading a study in bounded pieces (docs/development.md, "Reading a study"): keyset pages of rows,
each page one statement, and lists of values cut into chunks, so that no statement binds one
parameter per stored row and memory does not grow with the study."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select
from sqlalchemy.sql.elements import ColumnElement

#: rows per page, values per chunk: a statement's parameters and a page's objects stay this small
BATCH = 2000
T = TypeVar("T")


def pages(conn: Connection, q: Select[Any], key: ColumnElement[Any], size: int = BATCH) -> Iterator[list[Row[Any]]]:
    """The rows of `q` in pages of at most `size`, in the order of `key` (unique among q's rows and
    q's first column); each page is one statement (`key > last`, ORDER BY key, LIMIT size)."""
    last: Any = None
    while True:
        stmt = q if last is None else q.where(key > last)
        rows = list(conn.execute(stmt.order_by(key).limit(size)).all())
        if rows:
            yield rows
        if len(rows) < size:
            return
        last = rows[-1][0]


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
