"""Import any CSV or JSONL file with a column mapping (DESIGN §6).

The mapping names which column fills which instance field:

- `input`: the instance x shown to the agents (target SMILES for drug, text otherwise)
- `image`: an image path relative to the images root (rad)
- `prediction` (or `label`): the reference prediction (a label for rad, reactant
  SMILES for drug)
- `explanation`: the reference explanation
- `key`: a stable identifier (default: a hash of the row's content)
- `split`: train, val or test

A key used by several rows gives one instance per row (`key`, `key#2`, ...); a row
identical in every field to an earlier one is imported once (both with a warning).

Columns named like a field map to it unless mapped otherwise; other columns go to
the instance's meta. Keys, predictions and SMILES follow the text rule's clean_name, free text
its clean_text (pxp.protocols.text): two keys equal after it are one key repeated. Every row is
checked; one problem keeps the whole file out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from pxp.data.images import ImageCache, ImageRejected, PreparedImage
from pxp.data.importers.common import (
    SPLITS,
    ImportProblems,
    ImportResult,
    NewInstance,
    Problems,
    check_split,
    check_task,
)
from pxp.data.importers.jsonl import iter_jsonl, jsonl_columns
from pxp.data.importers.reading import CsvRows, Meter, ProgressFn, csv_row_hash, row_hash
from pxp.data.importers.stage import hashes_rows, store_instances, store_twice
from pxp.data.importers.study import smiles_problem
from pxp.data.match import label_in, label_set
from pxp.protocols.text import TextRefused, clean_name, clean_text

FIELDS = ("key", "input", "image", "prediction", "label", "explanation", "split")
REQUIRED = {"rad": ("image",), "drug": ("input",)}


def parse_mapping(items: Sequence[str]) -> dict[str, str]:
    """`col=field` strings to {column: field}; ImportProblems for a malformed one."""
    mapping: dict[str, str] = {}
    problems: list[str] = Problems()
    for item in items:
        col, sep, fld = item.partition("=")
        col, fld = col.strip(), fld.strip().lower()
        if not sep or not col or not fld:
            problems.append(f"--map {item!r}: expected COLUMN=FIELD")
        elif fld not in FIELDS:
            problems.append(f"--map {item!r}: unknown field {fld!r} (one of {', '.join(FIELDS)})")
        else:
            mapping[col] = fld
    if problems:
        raise ImportProblems(problems)
    return mapping


class _HeaderGrew(Exception):
    """A JSONL line brought a column that changes the mapping read from the first line."""


def _jsonl_rows(path: Path, mapping: Mapping[str, str] | None, task: str, problems: list[str],
                meter: Meter, full: bool) -> tuple[dict[str, str], Iterator[tuple[int, dict[str, str]]]]:
    """The mapping and the rows of a JSONL file. With `full` a first pass reads every key; without,
    the first object's keys decide the mapping, and a later key that would change it raises
    _HeaderGrew (the import is rolled back and done again with `full`)."""
    if full:
        return _columns(path, jsonl_columns(path), mapping, task), iter_jsonl(path, problems, meter)
    rows = iter_jsonl(path, problems, meter)
    first = next(rows, None)
    if first is None:
        raise _HeaderGrew
    try:
        col_of = _columns(path, list(first[1]), mapping, task)
    except ImportProblems:
        raise _HeaderGrew from None

    def watched() -> Iterator[tuple[int, dict[str, str]]]:
        known = set(first[1])
        yield first
        for row in rows:
            if not known.issuperset(row[1]):
                known.update(row[1])
                try:
                    if _columns(path, sorted(known), mapping, task) != col_of:
                        raise _HeaderGrew
                except ImportProblems:
                    raise _HeaderGrew from None
            yield row

    return col_of, watched()


def _columns(path: Path, header: list[str], mapping: Mapping[str, str] | None, task: str) -> dict[str, str]:
    col_of: dict[str, str] = {}
    for col, fld in (mapping or {}).items():
        if col not in header:
            raise ImportProblems([f"{path.name}: no column {col!r} to map "
                                  f"(found: {', '.join(header)})"])
        if fld in col_of:
            raise ImportProblems([f"two columns map to {fld!r}: {col_of[fld]!r} and {col!r}"])
        col_of[fld] = col
    for fld in FIELDS:
        if fld not in col_of and fld in header and fld not in (mapping or {}):
            col_of[fld] = fld
    if "label" in col_of and "prediction" not in col_of:
        col_of["prediction"] = col_of.pop("label")
    col_of.pop("label", None)
    required = REQUIRED.get(task, ("input",))
    missing = [f for f in required if f not in col_of]
    if missing:
        raise ImportProblems([f"{path.name}: no column for {', '.join(missing)}; "
                              f"map one with --map COLUMN={missing[0]}"])
    return col_of


def import_table(
    engine: Engine,
    path: Path,
    *,
    task: str = "text",
    mapping: Mapping[str, str] | Sequence[str] | None = None,
    name: str | None = None,
    split: str | None = None,
    images_root: Path | None = None,
    progress: ProgressFn | None = None,
    labels: Sequence[str] | None = None,
) -> ImportResult:
    """Validate a CSV/JSONL file under a column mapping while storing it as dataset `name`, in
    one pass and one transaction (nothing is kept if any row has a problem).

    `mapping` is {column: field} or a list of "column=field" strings; `progress` is called with
    rows done and the fraction of the file read. A rad dataset's labels come from its task: `labels`,
    else the study's five findings; a label outside the set is refused with its line.
    """
    path = Path(path)
    if mapping is not None and not isinstance(mapping, Mapping):
        mapping = parse_mapping([str(m) for m in mapping])
    task = check_task(engine, task)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise ImportProblems([f"{path.name}: expected a .csv or .jsonl file"])
    meter = Meter(progress)
    root = Path(images_root) if images_root is not None else path.parent
    full = False

    def store(direct: bool) -> ImportResult:
        nonlocal full
        while True:
            try:
                return _store(engine, path, task, mapping, name, split, root, meter, labels, full, direct)
            except _HeaderGrew:  # rolled back: read the file again knowing every column
                full = True
                meter.bytes = meter.rows = 0

    return store_twice(meter, store)


def _store(engine: Engine, path: Path, task: str, mapping: Mapping[str, str] | None, name: str | None,
           split: str | None, root: Path, meter: Meter, labels: Sequence[str] | None, full: bool,
           direct: bool) -> ImportResult:
    """One reading of the file, stored as it is read (see import_table); _HeaderGrew when a JSONL
    line brings a column that changes the mapping."""
    problems: list[str] = Problems()
    fixed_split = check_split(split, "--split", problems)
    rows: Iterable[tuple[int, dict[str, str]]]
    if path.suffix.lower() == ".csv":
        rows = CsvRows(path, meter=meter)
        col_of = _columns(path, rows.header, mapping, task)
    else:
        col_of, rows = _jsonl_rows(path, mapping, task, problems, meter, full)
    seen: list[str] = []
    allowed = label_set(labels, path.name) if task == "rad" else None
    warns: list[str] = []
    items = _items(path, rows, task, col_of, problems, ImageCache(root), fixed_split if split else None,
                   seen, bool(split), allowed, warns, hashed=hashes_rows(engine, direct))
    return store_instances(
        engine, name=name or path.stem, task=task, items=items, problems=problems, meter=meter,
        repeats=(path.name, "key"), description=f"imported from {path.name}", source=str(path),
        warnings=warns, config={"labels": list(allowed.values()) if labels and allowed else seen},
        direct=direct,
    )


def _items(path: Path, rows: Iterable[tuple[int, dict[str, str]]], task: str, col_of: dict[str, str],
           problems: list[str], cache: ImageCache, fixed_split: str | None, labels: list[str],
           split_given: bool, allowed: dict[str, str] | None = None,
           warns: list[str] | None = None, *, hashed: bool = True) -> Iterator[NewInstance]:
    """The file's rows as instances, each checked; a problem line for each row that fails. Without
    `hashed` the instances' row_hash is left 0 (not read where they are stored)."""
    required = REQUIRED.get(task, ("input",))
    used = set(col_of.values())
    c_in, c_pred, c_expl = col_of.get("input"), col_of.get("prediction"), col_of.get("explanation")
    c_img, c_key, c_split = col_of.get("image"), col_of.get("key"), col_of.get("split")
    req_cols = [(f, col_of[f]) for f in required]
    only_input = required == ("input",)
    # a CSV's columns are its header's: the meta columns are known before the first row
    extra = [h for h in rows.header if h not in used] if isinstance(rows, CsvRows) else None
    seen_labels = set(labels)
    hasher = (csv_row_hash if isinstance(rows, CsvRows) else row_hash) if hashed else _unhashed
    name = path.name
    as_input = clean_name if task == "drug" else clean_text
    unlabelled: list[int] = []
    for line, r in rows:
        try:
            # the field alone: the refusal is prefixed with the file and line (not built per row)
            x = as_input(r.get(c_in, "").strip(), "input") if c_in else ""
            prediction = clean_name(r.get(c_pred, ""), "prediction") if c_pred else ""
            explanation = clean_text(r.get(c_expl, "").strip(), "explanation") if c_expl else ""
            given_key = clean_name(r.get(c_key, ""), "key") if c_key else ""
            meta: dict[str, Any] = ({k: clean_text(v, k) for k, v in r.items() if v != "" and k not in used}
                                    if extra is None else {k: clean_text(r[k], k) for k in extra if r[k] != ""})
        except TextRefused as err:
            problems.append(f"{name}:{line}: {err}")
            continue
        if not (x and only_input):
            empty = [f for f, c in req_cols if not (x if f == "input" else r.get(c, "").strip())]
            if empty:
                problems.append(f"{name}:{line}: empty {', '.join(empty)}")
                continue
        if task == "rad" and c_pred and not prediction:
            problems.append(f"{name}:{line}: empty label in column {c_pred!r}; fill it in, or import "
                            "without a label column for an unlabelled dataset")
            continue
        if c_pred and not prediction:
            unlabelled.append(line)
        if allowed is not None and prediction:
            known = label_in(allowed, prediction, f"{name}:{line}", "; give the dataset's set with --labels")
            if isinstance(known, TextRefused):
                problems.append(str(known))
                continue
            prediction = known
        if task == "drug":
            bad = [p for p in (smiles_problem(x, "target (input)"),
                               smiles_problem(prediction, "reactant (prediction)")
                               if prediction else None) if p]
            if bad:
                problems.append(f"{name}:{line}: {'; '.join(bad)}")
                continue
        img: PreparedImage | None = None
        if c_img:
            try:
                img = cache.load(r.get(c_img, "").strip(), where=f"{name}:{line}")
            except ImageRejected as err:
                problems.append(str(err))
                continue
        key = given_key or "row-" + hashlib.sha256(
            "\x1f".join((x, img.sha256 if img else "", prediction, explanation)).encode()
        ).hexdigest()[:16]
        given_split = r.get(c_split, "") if c_split and not split_given else None
        row_split = fixed_split if split_given else given_split if given_split in SPLITS else check_split(
            given_split, f"{name}:{line}", problems)
        if c_img:
            meta["file"] = r.get(c_img, "").strip()
        if task == "rad" and prediction and prediction not in seen_labels:
            seen_labels.add(prediction)
            labels.append(prediction)
        yield NewInstance(
            key=key, split=row_split, image=img, payload=x,
            label=prediction if task == "rad" else "", reference_prediction=prediction,
            reference_explanation=explanation, meta=meta, line=line, row_hash=hasher(r),
        )
    if unlabelled and warns is not None:  # never silent: a person can annotate them, the proxy cannot
        first = ", ".join(str(n) for n in unlabelled[:5]) + (", ..." if len(unlabelled) > 5 else "")
        warns.append(f"{name}: {len(unlabelled):,} row(s) have no {c_pred} (lines {first}): a person can annotate "
                     "them, but the database proxy has no answer for them")
    if isinstance(rows, CsvRows) and rows.problems:
        problems[:] = rows.problems  # a file it cannot read is reported alone


def _unhashed(row: dict[str, str]) -> int:
    return 0


import_generic = import_table
"""The name the app's Datasets page calls."""
