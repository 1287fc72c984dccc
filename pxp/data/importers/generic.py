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
the instance's meta. Everything is validated before anything is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from pxp.data.images import ImageCache, ImageRejected, PreparedImage
from pxp.data.importers.common import (
    ImportProblems,
    ImportResult,
    NewInstance,
    RepeatedKeys,
    check_split,
    check_task,
    read_csv,
    store_instances,
)
from pxp.data.importers.jsonl import read_jsonl
from pxp.data.importers.study import smiles_problem

FIELDS = ("key", "input", "image", "prediction", "label", "explanation", "split")
REQUIRED = {"rad": ("image",), "drug": ("input",)}


def parse_mapping(items: Sequence[str]) -> dict[str, str]:
    """`col=field` strings to {column: field}; ImportProblems for a malformed one."""
    mapping: dict[str, str] = {}
    problems = []
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


def _rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = read_jsonl(path)
        if not rows:
            raise ImportProblems([f"{path.name}: the file is empty"])
        header: list[str] = []
        for _, r in rows:
            header += [k for k in r if k not in header]
        return header, rows
    if suffix == ".csv":
        return read_csv(path, required=())
    raise ImportProblems([f"{path.name}: expected a .csv or .jsonl file"])


def import_table(
    engine: Engine,
    path: Path,
    *,
    task: str = "text",
    mapping: Mapping[str, str] | Sequence[str] | None = None,
    name: str | None = None,
    split: str | None = None,
    images_root: Path | None = None,
) -> ImportResult:
    """Validate a CSV/JSONL file under a column mapping, then store it as dataset `name`.

    `mapping` is {column: field} or a list of "column=field" strings.
    """
    path = Path(path)
    if mapping is not None and not isinstance(mapping, Mapping):
        mapping = parse_mapping([str(m) for m in mapping])
    task = check_task(engine, task)
    header, rows = _rows(path)
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
    problems: list[str] = []
    fixed_split = check_split(split, "--split", problems)
    root = Path(images_root) if images_root is not None else path.parent
    used = set(col_of.values())
    cache = ImageCache(root)
    items: list[NewInstance] = []
    keys = RepeatedKeys(path.name, "key")
    labels: list[str] = []
    for line, r in rows:
        where = f"{path.name}:{line}"

        def get(fld: str, row: dict[str, str] = r) -> str:
            return row.get(col_of[fld], "").strip() if fld in col_of else ""

        x, prediction, explanation = get("input"), get("prediction"), get("explanation")
        img: PreparedImage | None = None
        empty = [f for f in required if not get(f)]
        if empty:
            problems.append(f"{where}: empty {', '.join(empty)}")
            continue
        if task == "rad" and "prediction" in col_of and not prediction:
            problems.append(f"{where}: empty label in column {col_of['prediction']!r}; fill it in, or import "
                            "without a label column for an unlabelled dataset")
            continue
        if task == "drug":
            bad = [p for p in (smiles_problem(x, "target (input)"),
                               smiles_problem(prediction, "reactant (prediction)")
                               if prediction else None) if p]
            if bad:
                problems.append(f"{where}: {'; '.join(bad)}")
                continue
        if "image" in col_of:
            try:
                img = cache.load(get("image"), where=where)
            except ImageRejected as err:
                problems.append(str(err))
                continue
        key = get("key") or "row-" + hashlib.sha256(
            "\x1f".join((x, img.sha256 if img else "", prediction, explanation)).encode()
        ).hexdigest()[:16]
        unique = keys.key(key, line, r)
        if unique is None:
            continue
        row_split = fixed_split if split else check_split(get("split"), where, problems)
        meta: dict[str, Any] = {k: v for k, v in r.items() if k not in used and v != ""}
        if "image" in col_of:
            meta["file"] = get("image")
        if task == "rad" and prediction and prediction not in labels:
            labels.append(prediction)
        items.append(NewInstance(
            key=unique, split=row_split, image=img, payload=x,
            label=prediction if task == "rad" else "", reference_prediction=prediction,
            reference_explanation=explanation, meta=meta,
        ))
    if problems:
        raise ImportProblems(problems)
    return store_instances(
        engine, name=name or path.stem, task=task, items=items, warnings=keys.summary(),
        description=f"imported from {path.name}", source=str(path),
        config={"labels": labels} if labels else {},
    )


import_generic = import_table
"""The name the app's Datasets page calls."""
