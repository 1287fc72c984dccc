"""Storing an import in one transaction, in batches, through a staging table (docs/development.md
"Imports at dataset scale"; DESIGN §4, §6).

The importer's rows stream into a temporary table (SQLAlchemy Core `executemany` on SQLite,
`COPY` on PostgreSQL), a few thousand at a time, so memory does not grow with the file. The
rest is set-based SQL in the same transaction: repeated keys (`key`, `key#2`, ...; a row
identical to an earlier one under its key is dropped), the comparison with the instances
already stored (a changed instance that a stored session refers to is refused), the updates,
and one `INSERT ... SELECT` of the new instances. On PostgreSQL the comparison of a file whose
keys are all different runs batch by batch while the file is read (a checked stage), so that
importing an unchanged file again costs no more than its first import. Any problem, an error or
a kill leaves the database as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import (
    JSON,
    Select,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal,
    not_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from pxp.data.importers.common import ImportProblems, ImportResult, NewInstance
from pxp.data.importers.reading import Meter
from pxp.data.importers.sending import STAGE, KeyRepeated, Stager, send_items, whole_tables
from pxp.protocols.text import TextRefused, identity
from pxp.storage import core_tables
from pxp.storage.core import same_name_in

DATASET, INSTANCE, SESSION = core_tables.dataset, core_tables.instance, core_tables.session


def _repeats(conn: Connection, what: tuple[str, str] | None, problems: list[str]) -> tuple[list[str], int]:
    """Number repeated keys (`key#2`, ...) and drop rows identical to an earlier one under the
    same key; the warnings, as one line per identical row and one naming the repeated keys.
    Without `what` (file, what is repeated) a key given twice is a problem naming its lines.
    Also returns how many rows were dropped."""
    s = STAGE
    dup = select(s.c.key).group_by(s.c.key).having(func.count() > 1).subquery()
    rows = conn.execute(select(s.c.seq, s.c.line, s.c.key, s.c.rowhash)
                        .join(dup, dup.c.key == s.c.key).order_by(s.c.seq))
    groups: dict[str, list[tuple[int, int, int]]] = {}
    identical: list[str] = []
    changes: list[dict[str, Any]] = []
    for seq, line, key, rowhash in rows:
        kept = groups.setdefault(key, [])
        first = next((ln for _, ln, h in kept if h == rowhash), None)
        if first is not None and what is not None:
            identical.append(f"{what[0]}:{line}: identical to line {first}; imported once")
            changes.append({"s": seq, "k": key, "d": 1})
            continue
        kept.append((seq, line, rowhash))
        if len(kept) > 1:
            changes.append({"s": seq, "k": f"{key}#{len(kept)}", "d": 0})
    if not groups:
        return [], 0
    if what is None:
        problems += [f"key {k!r} given twice (lines {', '.join(str(ln) for _, ln, _ in v)}); "
                     "give each row its own key" for k, v in groups.items()]
        return [], 0
    if changes:
        conn.execute(update(s).where(s.c.seq == bindparam("s"))
                     .values(key=bindparam("k"), dropped=bindparam("d")), changes)
        clash = conn.execute(select(s.c.key).where(s.c.dropped == 0).group_by(s.c.key)
                             .having(func.count() > 1)).scalars().all()
        problems += [f"{what[0]}: key {k!r} is given in the file and is also the name of a repeated "
                     f"{what[1]}'s later row; rename it" for k in clash]
    rep = [f"{k} (lines {', '.join(str(ln) for _, ln, _ in v)})" for k, v in groups.items() if len(v) > 1]
    if rep:
        identical.append(f"{what[0]}: {what[1]} repeated, each row kept as its own instance "
                         f"(key#2, ...): {'; '.join(rep)}")
    return identical, sum(c["d"] for c in changes)


def _meta(conn: Connection) -> Any:
    return cast(STAGE.c.meta, JSON) if conn.dialect.name == "postgresql" else STAGE.c.meta


def _compared(i: Any, s: Any) -> tuple[Any, Any]:
    """A stored instance `i` and a staged row `s`: (same content, same in every field) as SQL."""
    content = and_(i.c.asset_sha256.is_not_distinct_from(s.c.asset_sha256), i.c.payload == s.c.payload,
                   i.c.label == s.c.label, i.c.reference_prediction == s.c.reference_prediction,
                   i.c.reference_explanation == s.c.reference_explanation)
    same = and_(content, func.coalesce(s.c.split, i.c.split).is_not_distinct_from(i.c.split),
                cast(i.c.meta, Text) == s.c.meta)
    return content, same


def _counts(i: Any, s: Any) -> Select[int, int, int]:
    """Of the pairs (stored instance `i`, staged row `s`) joined: how many, how many differ, how many
    differ in content."""
    content, same = _compared(i, s)
    return select(func.count(), func.coalesce(func.sum(case((not_(same), 1), else_=0)), 0),
                  func.coalesce(func.sum(case((not_(content), 1), else_=0)), 0))


class _Checked:
    """Each batch sent to the stage (with unique keys; PostgreSQL) compared with the dataset's stored
    instances as it comes, while the next is read: one index look-up a row (a lateral join, whatever
    the planner thinks of a just-imported table), the counts summed."""

    def __init__(self, conn: Connection, ds_id: int) -> None:
        self.conn, self.counts = conn, (0, 0, 0)
        s = select(STAGE).where(STAGE.c.seq > bindparam("lo"), STAGE.c.seq <= bindparam("hi")).subquery("s")
        i = select(INSTANCE).where(INSTANCE.c.dataset_id == ds_id, INSTANCE.c.key == s.c.key).limit(1).lateral("i")
        self.query = _counts(i, s).select_from(s.join(i, literal(True)))

    def __call__(self, lo: int, hi: int) -> None:
        matched, changed, other = self.conn.execute(self.query, {"lo": lo, "hi": hi}).one()
        self.counts = (self.counts[0] + matched, self.counts[1] + changed, self.counts[2] + other)


def _merge(conn: Connection, ds_id: int, name: str, problems: list[str], result: ImportResult,
           counts: tuple[int, int, int] | None = None) -> int:
    """Compare the staged rows with the dataset's stored instances: refuse changed content under
    a stored session, update the changed ones, count the unchanged; how many rows matched.
    `counts` (matched, changed, changed in content): already counted as the rows were sent."""
    i, s = INSTANCE, STAGE
    on = and_(i.c.dataset_id == ds_id, i.c.key == s.c.key, s.c.dropped == 0)
    content, same = _compared(i, s)
    # one pass to count (not rowcount: psycopg's can be -1 after an executemany); the stored
    # sessions are looked at only when some content changed
    matched, changed, other = counts or conn.execute(_counts(i, s).select_from(s.join(i, on))).one()
    if other:
        used = conn.execute(select(s.c.key).select_from(s.join(i, on))
                            .where(not_(content), exists().where(SESSION.c.instance_id == i.c.id))
                            .order_by(s.c.seq)).scalars().all()
        problems += [f"dataset {name!r}: key {key!r} already holds other content, and stored sessions were run "
                     "on it; import under a new --name (a new version of the dataset)" for key in used]
        if problems:
            return 0
    result.updated, result.unchanged = int(changed), int(matched) - int(changed)
    if result.updated:
        conn.execute(update(i).where(on, not_(same)).values(
            split=func.coalesce(s.c.split, i.c.split), asset_sha256=s.c.asset_sha256, payload=s.c.payload,
            label=s.c.label, reference_prediction=s.c.reference_prediction,
            reference_explanation=s.c.reference_explanation, meta=_meta(conn)))
    return int(matched)


def _insert_new(conn: Connection, ds_id: int, fresh: bool, dense: bool) -> int:
    """INSERT ... SELECT the staged rows not stored yet, numbered after the dataset's last; how many.
    `dense` (a dataset with no instance yet and no row dropped): the staged order is the ordinal,
    with no window to sort a million rows by."""
    i, s = INSTANCE, STAGE
    top, before = (0, 0) if fresh else conn.execute(
        select(func.coalesce(func.max(i.c.ordinal), 0), func.count()).where(i.c.dataset_id == ds_id)).one()
    ordinal = s.c.seq if fresh and dense else literal(top) + func.row_number().over(order_by=s.c.seq)
    rows = select(literal(ds_id), s.c.key, ordinal,
                  s.c.split, s.c.asset_sha256, s.c.payload, s.c.label, s.c.reference_prediction,
                  s.c.reference_explanation, _meta(conn)).where(s.c.dropped == 0)
    if not fresh:
        rows = rows.where(~exists().where(i.c.dataset_id == ds_id, i.c.key == s.c.key))
    cols = ["dataset_id", "key", "ordinal", "split", "asset_sha256", "payload", "label",
            "reference_prediction", "reference_explanation", "meta"]
    conn.execute(insert(i).from_select(cols, rows))
    return int(conn.execute(select(func.count()).select_from(i).where(i.c.dataset_id == ds_id)).scalar_one()) - before


def _find(conn: Connection, name: str) -> Row[Any] | None:
    """The dataset `name`, or None."""
    return conn.execute(select(DATASET).where(DATASET.c.name == name)).first()


def _dataset(conn: Connection, name: str, task: str, *, ds: Row[Any] | None, synthetic: bool,
             **about: str) -> Row[Any]:
    """The dataset `name` (`ds` if found), made now if new; refused if another import just made it."""
    if ds is None:
        other = same_name_in(conn, DATASET, name)
        if other is not None and other != name:
            raise ImportProblems([f"the dataset name {name!r} looks the same as the dataset {other!r}: give that "
                                  "name exactly to add to it, or another --name"])
        try:
            conn.execute(insert(DATASET).values(name=name, task=task, synthetic=synthetic, config={},
                                                description=about["description"], source=about["source"]))
        except IntegrityError:  # another import made a dataset of this name since this one began
            raise ImportProblems([f"dataset {name!r} was created by another import meanwhile; nothing of "
                                  f"{about['source'] or 'this file'} was stored: import it again (it then updates that "
                                  "dataset) or choose another --name"]) from None
        ds = _find(conn, name)
        assert ds is not None
    return ds


def _configure(conn: Connection, ds: Row[Any], config: dict[str, Any] | None, synthetic: bool) -> None:
    """Merge `config` into the dataset's: labels united in order, other entries replaced."""
    merged = dict(ds.config or {})
    for k, v in (config or {}).items():
        if k == "labels":
            old = [str(x) for x in merged.get("labels", [])]
            merged["labels"] = old + [str(x) for x in v if str(x) not in old]
            if not merged["labels"]:
                del merged["labels"]
        else:
            merged[k] = v
    if merged != (ds.config or {}) or (synthetic and not ds.synthetic):
        conn.execute(update(DATASET).where(DATASET.c.id == ds.id).values(
            config=merged, synthetic=bool(ds.synthetic or synthetic)))


def _has_instances(conn: Connection, ds_id: int) -> bool:
    return conn.execute(select(INSTANCE.c.id).where(INSTANCE.c.dataset_id == ds_id).limit(1)).first() is not None


def hashes_rows(engine: Engine, direct: bool) -> bool:
    """Whether store_instances(direct=direct) on `engine` reads the items' row_hash: only through
    the plain staging table (PostgreSQL's first try has no key twice)."""
    return not (direct and engine.dialect.name == "postgresql")


def store_twice(meter: Meter | None, store: Callable[[bool], ImportResult]) -> ImportResult:
    """`store(True)`, which may send the rows straight into `instance` or to a checked stage; when
    a key repeats there, the import is rolled back and done again as `store(False)`, through the
    plain staging table."""
    try:
        return store(True)
    except KeyRepeated:
        if meter is not None:
            meter.bytes = meter.rows = 0
        return store(False)


def store_instances(
    engine: Engine,
    *,
    name: str,
    task: str,
    items: Iterable[NewInstance],
    problems: list[str] | None = None,
    description: str = "",
    source: str = "",
    synthetic: bool = False,
    config: dict[str, Any] | None = None,
    warnings: Iterable[str] = (),
    repeats: tuple[str, str] | None = None,
    meter: Meter | None = None,
    direct: bool = False,
) -> ImportResult:
    """Store the instances `items` yields in one transaction, idempotently by (dataset, key).

    `problems` is the importer's list, filled while `items` is consumed: once it holds one,
    nothing more is staged, and at the end ImportProblems rolls everything back. `repeats`
    (file, what) numbers repeated keys with warnings; without it a repeated key is a problem.
    `config` and `warnings` are read after the items (an importer fills them meanwhile);
    config entries merge into the dataset's (labels united in order, others replaced).
    With `direct`, on PostgreSQL, a dataset with no instance yet gets its rows by COPY straight
    into `instance`, and one with instances has them compared batch by batch as they are sent (a
    checked stage); a repeated key then raises KeyRepeated (see store_twice).
    """
    try:
        name = identity(name, "the dataset name").text
    except TextRefused as err:
        raise ImportProblems([str(err)]) from None
    if not name:
        raise ImportProblems(["the dataset needs a name"])
    if len(name) > 200:
        raise ImportProblems(["the dataset name is longer than 200 characters"])
    problems = problems if problems is not None else []
    result = ImportResult(dataset=name)
    about = {"description": description, "source": source}
    with engine.begin() as conn:
        ds: Row[Any] | None = None
        checked: _Checked | None = None
        if conn.dialect.name == "postgresql":  # the repeated-key grouping of a million keys, in memory
            conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")
            ds = _find(conn, name)
            if not direct or (ds is not None and ds.task != task):  # refused below, as through the stage
                direct = False
            elif ds is not None and _has_instances(conn, int(ds.id or 0)):  # compared as it is sent
                checked, direct = _Checked(conn, int(ds.id or 0)), False
            else:
                ds = _dataset(conn, name, task, ds=ds, synthetic=synthetic, **about)
        stager = Stager(conn, int(ds.id or 0) if direct and ds is not None else None, checked=checked)
        seq = send_items(conn, stager, items, problems, result, meter)
        if problems:
            raise ImportProblems(problems)
        if stager.ds_id is not None and ds is not None:  # stored already; no key repeated
            result.added = seq
            result.warnings = list(warnings)
            _configure(conn, ds, config, synthetic)
            return result
        whole_tables(conn)
        # the stored tables are first read here, after the file: on SQLite a read transaction held
        # while another connection writes could not become a write one (a stale snapshot)
        ds = _find(conn, name)
        if ds is not None and ds.task != task:
            raise ImportProblems([f"dataset {name!r} already exists for task {ds.task!r}, "
                                  f"not {task!r}; choose another --name"])
        # a checked stage has had no key twice: nothing to number
        repeated, dropped = _repeats(conn, repeats, problems) if checked is None else ([], 0)
        result.warnings = list(warnings) + repeated
        if problems:
            raise ImportProblems(problems)
        fresh = ds is None
        ds = _dataset(conn, name, task, ds=ds, synthetic=synthetic, **about)
        _configure(conn, ds, config, synthetic)
        ds_id = int(ds.id or 0)
        if not fresh and _has_instances(conn, ds_id):
            matched = _merge(conn, ds_id, name, problems, result, checked.counts if checked else None)
            if problems:
                raise ImportProblems(problems)
            if matched < seq - dropped:  # some rows are new
                result.added = _insert_new(conn, ds_id, fresh=False, dense=False)
        else:
            result.added = _insert_new(conn, ds_id, fresh=True, dense=not dropped)
        stager.drop()
    return result
