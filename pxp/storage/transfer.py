"""What one database holds, added to another in one transaction (docs/operations.md, Databases): how `pxp demo`
adds the demo to a database that already holds data, all of it or nothing.

The rows are read from `source` (a fresh database the demo was made in) and inserted into `target` table by table,
parents first, each row under a new id; every reference to an id follows it: the foreign keys, and the ids kept in
JSON (`ID_LISTS`). An asset (content-addressed) already in the target is shared, not copied. One transaction: a
failure anywhere (a full disk, a lost connection, a name taken meanwhile) leaves the target as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, Table, insert, select
from sqlalchemy.schema import sort_tables
from sqlmodel import SQLModel

from pxp.storage.batches import chunks

#: ids kept in a JSON column rather than a foreign key: (table, column, key inside the JSON object or "" for the
#: column itself) → the table they are ids of
ID_LISTS: dict[tuple[str, str, str], str] = {
    ("run", "instance_order", ""): "instance",
    ("context", "content", "carried_sessions"): "session",
}
#: tables whose rows name ids without a foreign key this module could follow: a source holding any is refused
UNFOLLOWED = ("llmcall_pending", "audit_event")
#: rows per INSERT statement
BATCH = 500


class TransferError(ValueError):
    """The source holds rows this module cannot add to another database faithfully."""


def _tables() -> list[Table]:
    by_name = SQLModel.metadata.tables
    extra = [(by_name[ref], by_name[table]) for (table, _, _), ref in ID_LISTS.items()]
    return [t for t in sort_tables(by_name.values(), extra_dependencies=extra) if t.name != "alembic_version"]


def _id_column(table: Table) -> str | None:
    """The table's own integer id (a new one in the target), or None for a natural key (an asset's sha256)."""
    (pk,) = table.primary_key.columns
    return pk.name if pk.name == "id" else None


def _rows(conn: Connection, table: Table) -> Iterator[dict[str, Any]]:
    for row in conn.execute(select(table).execution_options(yield_per=BATCH)).mappings():
        yield dict(row)


def add_all(source: Engine, target: Engine) -> dict[str, int]:
    """Insert every row of `source` into `target` in one transaction; the rows added per table."""
    ids: dict[str, dict[int, int]] = {}
    added: dict[str, int] = {}
    with source.connect() as src, target.begin() as dst:
        for table in _tables():
            if src.execute(select(table).limit(1)).first() is None:
                continue
            if table.name in UNFOLLOWED or (_id_column(table) is None and table.name != "asset"):
                raise TransferError(f"{table.name} rows cannot be added to another database")
            try:
                added[table.name] = _copy(src, dst, table, ids)
            except KeyError as e:
                raise TransferError(f"{table.name} refers to id {e} that the source does not hold") from None
    return added


def _copy(src: Connection, dst: Connection, table: Table, ids: dict[str, dict[int, int]]) -> int:
    own = _id_column(table)
    fks = {fk.parent.name: fk.column.table.name for fk in table.foreign_keys
           if fk.column.name == "id" and fk.column.table.name in ids}
    lists = {(col, key): ref for (name, col, key), ref in ID_LISTS.items() if name == table.name}
    mapped = ids.setdefault(table.name, {})
    count = 0
    rows = _rows(src, table)
    for batch in chunks(rows, BATCH):
        for row in batch:
            for col, ref in fks.items():
                if row[col] is not None:
                    row[col] = ids[ref][row[col]]
            for (col, key), ref in lists.items():
                row[col] = _follow(row[col], key, ids[ref])
        if own is None:  # assets: content-addressed, shared with what the target already holds
            have = set(dst.scalars(select(table.c.sha256).where(
                table.c.sha256.in_([r["sha256"] for r in batch]))))  # bounded: one batch
            batch = [r for r in batch if r["sha256"] not in have]
            if batch:
                dst.execute(insert(table), batch)
            count += len(batch)
            continue
        old = [r.pop(own) for r in batch]
        new = dst.scalars(insert(table).returning(table.c[own], sort_by_parameter_order=True), batch).all()
        mapped.update(zip(old, new, strict=True))
        count += len(batch)
    return count


def _follow(value: Any, key: str, mapped: dict[int, int]) -> Any:
    """The JSON value with the ids under `key` (or the value itself, a list, for "") replaced by their new ones."""
    if key == "":
        return [mapped[i] for i in value] if isinstance(value, list) else value
    if isinstance(value, dict) and isinstance(value.get(key), list):
        return {**value, key: [mapped[i] for i in value[key]]}
    return value
