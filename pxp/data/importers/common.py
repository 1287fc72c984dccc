"""What every importer shares: bounded reading of CSV/JSONL files, and storing a
validated batch of instances in one transaction (DESIGN §4, §6).

An importer first builds the complete list of rows to store, collecting one
problem line (file:line: reason) per fault; if there is any problem it raises
ImportProblems and nothing is written. Storing is idempotent: an instance is
identified by (dataset, key), so importing the same file again adds nothing.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import col, select

from pxp.data.images import PreparedImage, store_assets
from pxp.data.importers.limits import MAX_FIELD_CHARS, MAX_TABLE_BYTES
from pxp.protocols.errors import PxpError
from pxp.storage.store import db_session
from pxp.storage.tables import Dataset, Instance, Session

SPLITS = ("train", "val", "test")

csv.field_size_limit(MAX_FIELD_CHARS)


class ImportProblems(PxpError, ValueError):
    """Everything wrong with an input file, one line per problem (nothing was written)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))


@dataclass
class NewInstance:
    """A validated instance waiting to be stored."""

    key: str
    split: str | None = None
    image: PreparedImage | None = None
    payload: str = ""
    label: str = ""
    reference_prediction: str = ""
    reference_explanation: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    extra_assets: list[PreparedImage] = field(default_factory=list)


@dataclass
class ImportResult:
    """What an import did: counts, and warnings worth one line each."""

    dataset: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    assets_added: int = 0
    images: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def instances(self) -> int:
        return self.added + self.updated + self.unchanged

    def summary(self) -> str:
        parts = [f"{self.added} added"]
        if self.updated:
            parts.append(f"{self.updated} updated")
        if self.unchanged:
            parts.append(f"{self.unchanged} already there")
        img = f"; {self.images} image(s), {self.assets_added} newly stored" if self.images else ""
        return f"dataset {self.dataset!r}: {self.instances} instances ({', '.join(parts)}){img}"


class RepeatedKeys:
    """Rows that share a key: each is its own instance, `key`, `key#2`, ....

    A row identical in every field to an earlier row with the same key adds nothing
    (one warning line); `summary()` is one warning line naming the repeated keys.
    """

    def __init__(self, file: str, what: str = "key") -> None:
        self.file, self.what = file, what
        self.rows: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.warnings: list[str] = []

    def key(self, base: str, line: int, row: dict[str, str]) -> str | None:
        """The instance key for this row, or None if it repeats an earlier row exactly."""
        seen = self.rows.setdefault(base, [])
        for first, old in seen:
            if old == row:
                self.warnings.append(f"{self.file}:{line}: identical to line {first}; "
                                     "imported once")
                return None
        seen.append((line, row))
        return base if len(seen) == 1 else f"{base}#{len(seen)}"

    def summary(self) -> list[str]:
        """All warnings: identical rows, then one line naming the repeated keys."""
        rep = [f"{k} (lines {', '.join(str(n) for n, _ in v)})"
               for k, v in self.rows.items() if len(v) > 1]
        if not rep:
            return list(self.warnings)
        return [*self.warnings, f"{self.file}: {self.what} repeated, each row kept as its own "
                f"instance (key#2, ...): {'; '.join(rep)}"]


BUILTIN_TASKS = ("rad", "drug", "text")


def check_task(engine: Engine, task: str) -> str:
    """The task name if known (built in, or already the task of a stored dataset)."""
    name = (task or "").strip().lower()
    with db_session(engine) as db:
        stored = sorted({str(t) for t in db.exec(select(Dataset.task)).all()} - set(BUILTIN_TASKS))
    known = [*BUILTIN_TASKS, *stored]
    if name not in known:
        raise ImportProblems([f"unknown task {task!r}; known tasks: {', '.join(known)} "
                              "(a custom task is attached to a dataset with its config)"])
    return name


def check_split(split: str | None, where: str, problems: list[str]) -> str | None:
    """A split name (train, val, test) or None; a problem line for anything else."""
    if split is None or not split.strip():
        return None
    s = split.strip().lower()
    if s in ("valid", "validation", "dev"):
        s = "val"
    if s not in SPLITS:
        problems.append(f"{where}: split must be train, val or test, not {split!r}")
        return None
    return s


def read_text(path: Path) -> str:
    """The file's text (UTF-8, BOM allowed), bounded; ImportProblems if unreadable or empty."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ImportProblems([f"{path}: not a file"])
    except FileNotFoundError:
        raise ImportProblems([f"{path}: no such file"]) from None
    except OSError as err:
        raise ImportProblems([f"{path}: cannot read ({err.strerror})"]) from None
    if size > MAX_TABLE_BYTES:
        raise ImportProblems([f"{path}: {size / 1e6:.0f} MB is more than the "
                              f"{MAX_TABLE_BYTES // (1024 * 1024)} MB limit"])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ImportProblems(
            [f"{path.name}:{line}: not UTF-8 text (byte 0x{raw[err.start]:02x}); "
             "save the file as UTF-8"]
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ImportProblems([f"{path.name}:{line}: contains NUL bytes; not a text file"])
    if not text.strip():
        raise ImportProblems([f"{path.name}: the file is empty"])
    return text


def field_limit() -> str:
    """The one text limit, as an import error names it."""
    return f"a field is longer than the {MAX_FIELD_CHARS:,}-character limit for a text field; shorten it"


def _csv_reason(err: Exception) -> str:
    msg = str(err)
    if "unexpected end of data" in msg:
        return "unclosed quote"
    if "field larger than field limit" in msg:
        return field_limit()
    return f"malformed CSV ({msg})"


def read_csv(
    path: Path, *, required: Sequence[str], label: str = "CSV"
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and rows of a CSV file, each row with the line it starts on.

    Refuses (ImportProblems) an unreadable or empty file, a missing column, and rows
    with more fields than the header.
    """
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except (csv.Error, StopIteration) as err:
        raise ImportProblems([f"{path.name}:1: cannot read the {label} header "
                              f"({_csv_reason(err)})"]) from None
    header = [h.strip() for h in header]
    twice = sorted({h for h in header if h and header.count(h) > 1})
    if twice:
        raise ImportProblems([f"{path.name}:1: column {', '.join(repr(h) for h in twice)} appears twice in "
                              "the header; rename or drop one"])
    missing = [c for c in required if c not in header]
    if missing:
        raise ImportProblems([
            f"{path.name}:1: missing column(s) {', '.join(missing)} "
            f"(found: {', '.join(h for h in header if h) or 'none'})"
        ])
    rows: list[tuple[int, dict[str, str]]] = []
    problems: list[str] = []
    start = reader.line_num + 1
    try:
        for record in reader:
            line = start
            start = reader.line_num + 1
            if not record or all(not c.strip() for c in record):
                continue
            if len(record) != len(header):
                problems.append(f"{path.name}:{line}: {len(record)} fields but the header has "
                                f"{len(header)}; every row needs one field per column")
                continue
            rows.append((line, {h: (record[i] if i < len(record) else "")
                                for i, h in enumerate(header)}))
    except csv.Error as err:
        # strict parsing: a quote left open swallows the rest of the file, so refuse it
        # at the line where its row starts rather than read a merged row
        problems.append(f"{path.name}:{start}: {_csv_reason(err)}")
    if problems:
        raise ImportProblems(problems)
    if not rows:
        raise ImportProblems([f"{path.name}: the file has a header but no rows"])
    return header, rows


#: the longest instance key and label the store keeps (Instance.key, Instance.label)
MAX_KEY_CHARS, MAX_LABEL_CHARS = 300, 200


def _values(item: NewInstance) -> dict[str, Any]:
    return {
        "asset_sha256": item.image.sha256 if item.image is not None else None,
        "payload": item.payload,
        "label": item.label,
        "reference_prediction": item.reference_prediction,
        "reference_explanation": item.reference_explanation,
    }


def _check_keys(db: Any, name: str, items: Sequence[NewInstance], existing: dict[str, Instance]) -> None:
    """Refuse keys and labels longer than the store keeps, and new content under a key that a
    stored session refers to (a finished experiment's instance never changes under it)."""
    problems = [f"key {item.key[:40]!r}...: longer than the {MAX_KEY_CHARS} characters a key may have"
                for item in items if len(item.key) > MAX_KEY_CHARS]
    problems += [f"key {item.key!r}: label {item.label[:40]!r}... is longer than the {MAX_LABEL_CHARS} "
                 "characters a label may have" for item in items if len(item.label) > MAX_LABEL_CHARS]
    changed = {item.key: row.id for item in items if (row := existing.get(item.key)) is not None
               and any(getattr(row, k) != v for k, v in _values(item).items())}
    if changed:
        used = set(db.exec(select(Session.instance_id).where(
            col(Session.instance_id).in_([i for i in changed.values() if i is not None]))).all())
        problems += [f"dataset {name!r}: key {key!r} already holds other content, and stored sessions were run "
                     "on it; import under a new --name (a new version of the dataset)"
                     for key, iid in changed.items() if iid in used]
    if problems:
        raise ImportProblems(problems)


def store_instances(
    engine: Engine,
    *,
    name: str,
    task: str,
    items: Sequence[NewInstance],
    description: str = "",
    source: str = "",
    synthetic: bool = False,
    config: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> ImportResult:
    """Store a validated batch in one transaction, idempotently by (dataset, key).

    The dataset is created if needed; a dataset of the same name but another task is
    refused. `config` entries are merged into the dataset's config (labels are
    united in order; other keys replaced).
    """
    name = name.strip()
    if not name:
        raise ImportProblems(["the dataset needs a name"])
    if len(name) > 200:
        raise ImportProblems(["the dataset name is longer than 200 characters"])
    result = ImportResult(dataset=name, warnings=list(warnings))
    images = [i.image for i in items if i.image is not None]
    images += [a for i in items for a in i.extra_assets]
    result.images = len({i.sha256 for i in images})
    with db_session(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == name)).first()
        if ds is None:
            ds = Dataset(name=name, task=task, description=description, source=source,
                         synthetic=synthetic, config={})
            db.add(ds)
            db.flush()
        elif ds.task != task:
            raise ImportProblems([f"dataset {name!r} already exists for task {ds.task!r}, "
                                  f"not {task!r}; choose another --name"])
        merged = dict(ds.config or {})
        for k, v in (config or {}).items():
            if k == "labels":
                old = [str(x) for x in merged.get("labels", [])]
                merged["labels"] = old + [str(x) for x in v if str(x) not in old]
            else:
                merged[k] = v
        ds.config = merged
        if synthetic:
            ds.synthetic = True
        db.add(ds)
        result.assets_added = store_assets(db, images)
        existing = {i.key: i for i in db.exec(select(Instance).where(Instance.dataset_id == ds.id))}
        _check_keys(db, name, items, existing)
        top = db.exec(select(func.max(Instance.ordinal)).where(Instance.dataset_id == ds.id)).one()
        ordinal = int(top or 0)
        for item in items:
            values: dict[str, Any] = {
                "split": item.split,
                "asset_sha256": item.image.sha256 if item.image is not None else None,
                "payload": item.payload,
                "label": item.label,
                "reference_prediction": item.reference_prediction,
                "reference_explanation": item.reference_explanation,
                "meta": item.meta,
            }
            row = existing.get(item.key)
            if row is not None and item.split is None:
                values["split"] = row.split  # a file without splits keeps the ones assigned
            if row is None:
                ordinal += 1
                row = Instance(dataset_id=ds.id or 0, key=item.key, ordinal=ordinal, **values)
                db.add(row)
                existing[item.key] = row
                result.added += 1
            elif all(getattr(row, k) == v for k, v in values.items()):
                result.unchanged += 1
            else:
                for k, v in values.items():
                    setattr(row, k, v)
                db.add(row)
                result.updated += 1
    return result
