"""Sending an import's rows to the database in batches (docs/development.md "Imports at dataset
scale"): `COPY` on PostgreSQL, `executemany` on SQLite, to the staging table or, for a dataset with
no instance yet on PostgreSQL, straight into `instance`.

On PostgreSQL a writer thread sends each batch (and the database checks its keys and foreign keys)
while the importer reads and checks the next; the importer's thread never touches the connection
until the writer has finished. Python holds at most three batches. A stage `checked` as it is sent
(PostgreSQL, a dataset that has instances) has unique keys, and each batch is compared with the
stored instances by the writer while the next is read; a key given twice then raises KeyRepeated.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, Text, insert, select
from sqlalchemy.engine import Connection

from pxp.data.images import PreparedImage
from pxp.data.importers.common import ImportResult, NewInstance
from pxp.data.importers.reading import Meter
from pxp.storage import core_tables
from pxp.storage.times import utcnow

#: rows sent to the database at a time
BATCH = 5000
#: images sent with their batch at most (a batch of instances is sent early when it has this many)
IMAGE_BATCH = 64
#: the longest instance key and label the store keeps (Instance.key, Instance.label)
MAX_KEY_CHARS, MAX_LABEL_CHARS = 300, 200

_MD = MetaData()
STAGE = Table(
    "pxp_import_stage", _MD,
    Column("seq", Integer, primary_key=True, autoincrement=False),  # SQLite's rowid: free
    Column("line", Integer), Column("key", String), Column("rowhash", BigInteger),
    Column("split", String), Column("asset_sha256", String), Column("payload", Text),
    Column("label", String), Column("reference_prediction", Text),
    Column("reference_explanation", Text), Column("meta", Text), Column("dropped", Integer, server_default="0"),
    prefixes=["TEMPORARY"], postgresql_on_commit="DROP",
)
#: the columns of `instance` an import fills, in the order of a direct row
_DIRECT = ["dataset_id", "key", "ordinal", "split", "asset_sha256", "payload", "label",
           "reference_prediction", "reference_explanation", "meta"]
#: the columns of a checked stage's row (no key repeats there: no line or row hash to tell them apart)
_CHECKED = ["seq", "key", "split", "asset_sha256", "payload", "label", "reference_prediction",
            "reference_explanation", "meta"]
ASSET: Table = core_tables.asset


class KeyRepeated(Exception):
    """A key came twice while storing straight into `instance` or to a checked stage: the import is
    rolled back, to be done again through the plain staging table
    (pxp.data.importers.stage.store_twice)."""


class Stager:
    """Sends rows to a temporary table, `stage` (COPY on PostgreSQL); with `ds_id`, straight into
    `instance` as that dataset's (PostgreSQL, a dataset with no instance yet). With `checked`
    (PostgreSQL, to the stage), the stage's keys are unique (one given twice raises KeyRepeated)
    and `checked(lo, hi)` is called once the batch of seq lo < seq <= hi is sent."""

    def __init__(self, conn: Connection, ds_id: int | None = None, *, stage: Table = STAGE,
                 checked: Callable[[int, int], None] | None = None) -> None:
        self.conn, self.ds_id, self.stage = conn, ds_id, stage
        self.pg = conn.dialect.name == "postgresql"
        self.checked = checked if self.pg and ds_id is None else None
        self.table, cols = (stage.name, _CHECKED if self.checked else [c.name for c in stage.columns]) \
            if ds_id is None else ("instance", _DIRECT)
        self.cols = ", ".join(cols)
        if ds_id is None:
            self.drop()
            stage.create(conn)
            if self.checked is not None:
                conn.exec_driver_sql(f"CREATE UNIQUE INDEX {stage.name}_key ON {stage.name} (key)")
        marks = ", ".join("?" if not self.pg else "%s" for _ in cols)
        self.sql = f"INSERT INTO {self.table} ({self.cols}) VALUES ({marks})"

    def row(self, seq: int, item: NewInstance, sha: str | None) -> tuple[Any, ...]:
        meta = json.dumps(item.meta) if item.meta else "{}"
        if self.ds_id is not None:
            return (self.ds_id, item.key, seq, item.split, sha, item.payload, item.label,
                    item.reference_prediction, item.reference_explanation, meta)
        if self.checked is not None:
            return (seq, item.key, item.split, sha, item.payload, item.label, item.reference_prediction,
                    item.reference_explanation, meta)
        return (seq, item.line, item.key, item.row_hash, item.split, sha, item.payload, item.label,
                item.reference_prediction, item.reference_explanation, meta, 0)

    def send(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if not self.pg:
            self.conn.exec_driver_sql(self.sql, rows)  # type: ignore[arg-type]
            return
        try:
            copy_rows(self.conn, self.table, self.cols, rows)
        except Exception as err:
            if (self.ds_id is not None or self.checked is not None) and _repeated(err):
                raise KeyRepeated from None
            raise
        if self.checked is not None:
            self.checked(rows[0][0] - 1, rows[-1][0])

    def drop(self) -> None:
        if self.ds_id is None:
            schema = "" if self.pg else "temp."  # never a stored table of that name
            self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS {schema}{self.stage.name}")


def whole_tables(conn: Connection) -> None:
    """From here to the end of the transaction, PostgreSQL joins no tables by nested loop: the
    statements that follow compare a whole file with a whole dataset, and the planner's statistics
    of a table just filled, or of a dataset it has not analysed yet, put a few rows where there
    are a million (a nested loop over both would take hours). A hash or merge join costs one
    pass over each."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL enable_nestloop = off")


def _repeated(err: Exception) -> bool:
    return getattr(err, "sqlstate", None) == "23505"  # PostgreSQL's unique_violation


def copy_rows(conn: Connection, table: str, columns: str, rows: Iterable[Iterable[Any]]) -> None:
    """PostgreSQL COPY of `rows` into `table` (`columns` comma-separated), in the connection's
    transaction."""
    raw: Any = conn.connection.dbapi_connection
    with raw.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def store_assets(conn: Connection, images: list[PreparedImage]) -> int:
    """Insert the images not stored yet (Core, nothing kept by the session); how many."""
    by_sha = {img.sha256: img for img in images}
    if not by_sha:
        return 0
    known = select(ASSET.c.sha256).where(ASSET.c.sha256.in_(list(by_sha)))  # bounded: a batch's images
    stored = set(conn.execute(known).scalars())
    now = utcnow()
    rows = [{"sha256": sha, "mime": img.mime, "width": img.width, "height": img.height, "size": len(img.data),
             "data": img.data, "meta": dict(img.meta), "created_at": now}
            for sha, img in by_sha.items() if sha not in stored]
    if rows:
        conn.execute(insert(ASSET), rows)
    return len(rows)


class Writer:
    """Runs the database jobs handed to it, in order: in a thread on PostgreSQL (a job waits while
    one runs and one is queued), inline on SQLite, whose connection stays in its thread. Leaving
    the `with` block waits for the jobs; the first job's error is raised in the importer's thread."""

    def __init__(self, threaded: bool) -> None:
        self.error: BaseException | None = None
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._run, name="pxp-import-writer", daemon=True) if threaded else None
        if self._thread is not None:
            self._thread.start()

    def __call__(self, job: Callable[[], None], *, wait: bool = False) -> None:
        """Run `job`; with `wait`, return once it has run (its batch holds images)."""
        if self.error is not None:
            raise self.error
        if self._thread is None:
            job()
            return
        self._jobs.put(job)
        if wait:
            self._jobs.join()
            if self.error is not None:
                raise self.error

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if self.error is None:  # after an error the rest are dropped: the import rolls back
                    job()
            except BaseException as err:
                self.error = err
            finally:
                self._jobs.task_done()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
        if kind is None and self.error is not None:
            raise self.error


def length_problems(item: NewInstance) -> list[str]:
    out = []
    if len(item.key) > MAX_KEY_CHARS:
        out.append(f"key {item.key[:40]!r}...: longer than the {MAX_KEY_CHARS} characters a key may have")
    if len(item.label) > MAX_LABEL_CHARS:
        out.append(f"key {item.key!r}: label {item.label[:40]!r}... is longer than the {MAX_LABEL_CHARS} "
                   "characters a label may have")
    return out


def send_items(conn: Connection, stager: Stager, items: Iterable[NewInstance], problems: list[str],
               result: ImportResult, meter: Meter | None) -> int:
    """Send the items in batches, each batch's new images first; stop sending at the first problem
    (the items are still read to the end, so that every problem is named). How many rows were sent."""
    batch: list[tuple[Any, ...]] = []
    images: list[PreparedImage] = []
    shas: set[str] = set()
    seq = 0

    def job(rows: list[tuple[Any, ...]], imgs: list[PreparedImage]) -> Callable[[], None]:
        def run() -> None:
            result.assets_added += store_assets(conn, imgs)  # before the rows that name them
            stager.send(rows)
        return run

    with Writer(stager.pg) as writer:
        for item in items:
            if problems:
                continue  # keep reading: every problem of the file is reported
            if len(item.key) > MAX_KEY_CHARS or len(item.label) > MAX_LABEL_CHARS:
                problems += length_problems(item)
                continue
            seq += 1
            batch.append(stager.row(seq, item, item.image.sha256 if item.image is not None else None))
            if item.image is not None or item.extra_assets:
                new = [a for a in (item.image, *item.extra_assets) if a is not None and a.sha256 not in shas]
                shas.update(a.sha256 for a in new)
                images += new
            if len(batch) >= BATCH or len(images) >= IMAGE_BATCH:
                writer(job(batch, images), wait=bool(images))
                if meter is not None:
                    meter.tick(len(batch))
                batch, images = [], []
        if not problems:
            writer(job(batch, images))
            if meter is not None:
                meter.tick(len(batch), force=True)
    result.images = len(shas)
    return seq
