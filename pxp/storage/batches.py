"""Reading a study in bounded pieces (docs/development.md, "Reading a study"): keyset pages of rows,
each page one statement, and lists of values cut into chunks, so that no statement binds one
parameter per stored row and memory does not grow with the study."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, tuple_
from sqlalchemy.sql.elements import ColumnElement

#: rows per page, values per chunk: a statement's parameters and a page's objects stay this small
BATCH = 2000
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
        if rows:
            yield rows
        if len(rows) < size:
            return
        last = tuple(rows[-1][:len(key)])


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
