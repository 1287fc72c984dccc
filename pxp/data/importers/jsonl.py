"""JSONL read with its JSON types (DESIGN §6): one object per line, a key given twice, NaN and
Infinity refused; each problem names the file and the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pxp.data.importers.common import ImportProblems, field_limit, read_text
from pxp.data.importers.limits import MAX_FIELD_CHARS


class _Duplicate(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(f"the key {k!r} appears twice")
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_objects(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers, values as JSON typed them.

    A line that is not one JSON object, a key given twice and NaN/Infinity are refused.
    """
    text = read_text(path)
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{lineno}"
        try:
            rec = json.loads(line, object_pairs_hook=_object, parse_constant=_constant)
        except json.JSONDecodeError as err:
            problems.append(f"{where}: not valid JSON ({err.msg}); write one JSON object per line")
            continue
        except ValueError as err:  # a duplicate key, NaN or Infinity
            problems.append(f"{where}: {err}; fix the line")
            continue
        if not isinstance(rec, dict):
            problems.append(f"{where}: expected a JSON object {{...}}, got {json_kind(rec)}")
            continue
        rows.append((lineno, rec))
    if problems:
        raise ImportProblems(problems)
    return rows


def json_kind(v: Any) -> str:
    """How a JSON value is named in an error: null, a boolean, the number 2.5, an array, ..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return f"the number {v!r}"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return f"{v!r}"


def read_jsonl(path: Path) -> list[tuple[int, dict[str, str]]]:
    """Objects of a JSONL file with their line numbers; values as text.

    Typed values are checked, never turned into text blindly: a string is kept, a number
    is written as in the file, null is an empty cell; a boolean, an array or an object is
    refused, like a key given twice, NaN and Infinity (read_objects).
    """
    rows: list[tuple[int, dict[str, str]]] = []
    problems: list[str] = []
    for lineno, rec in read_objects(path):
        where = f"{path.name}:{lineno}"
        row: dict[str, str] = {}
        for k, v in rec.items():
            if v is None or isinstance(v, str):
                row[k] = v or ""
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = json.dumps(v)
            else:
                problems.append(f"{where}: field {k!r} must be text or a number, got {json_kind(v)}")
        if any(len(v) > MAX_FIELD_CHARS for v in row.values()):
            problems.append(f"{where}: {field_limit()}")
            continue
        rows.append((lineno, row))
    if problems:
        raise ImportProblems(problems)
    return rows
