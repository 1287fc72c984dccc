"""JSONL read with its JSON types (DESIGN §6): one object per line, a key given twice, NaN and
Infinity refused; each problem names the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pxp.data.importers.common import ImportProblems, Problems, field_limit
from pxp.data.importers.limits import MAX_FIELD_CHARS
from pxp.data.importers.reading import Meter, text_lines


class _Duplicate(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):  # a key given twice: name the first
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(f"the key {k!r} appears twice")
            seen.add(k)
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def iter_objects(path: Path, problems: list[str],
                 meter: Meter | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers, values as JSON typed them, read
    one line at a time; a line that is not one JSON object, a key given twice and NaN/Infinity
    are appended to `problems` and skipped."""
    for lineno, rec, _ in _objects(path, problems, meter):
        yield lineno, rec


def _objects(path: Path, problems: list[str], meter: Meter | None = None, *,
             twice: bool = True) -> Iterator[tuple[int, dict[str, Any], int]]:
    """iter_objects with each line's length; `twice` False does not look for a key given twice
    (a quicker first pass, the second finds it)."""
    hook = {"object_pairs_hook": _object} if twice else {}
    decoder = json.JSONDecoder(parse_constant=_constant, **hook)  # type: ignore[arg-type]
    scan = decoder.scan_once  # type: ignore[attr-defined]  # set in JSONDecoder.__init__, not declared
    loads = decoder.decode
    for lineno, line in enumerate(text_lines(path, meter), start=1):
        try:  # the common line, one value from its first character, by the C scanner alone
            rec, end = scan(line, 0)
            whole = end == len(line) or not line[end:].strip(" \t\n\r")  # JSON's whitespace, no other
        except (StopIteration, ValueError, RecursionError):  # read again below, its fault named as the decoder names it
            whole = False
        if not whole:
            if not line.strip():
                continue
            try:
                rec = loads(line)
            except json.JSONDecodeError as err:
                problems.append(f"{path.name}:{lineno}: not valid JSON ({err.msg}); write one JSON object per line")
                continue
            except ValueError as err:  # a duplicate key, NaN or Infinity
                problems.append(f"{path.name}:{lineno}: {err}; fix the line")
                continue
            except RecursionError:  # arrays or objects within each other thousands deep
                problems.append(f"{path.name}:{lineno}: not valid JSON here (arrays or objects nested too deeply "
                                "to read); write one flat JSON object per line")
                continue
        if not isinstance(rec, dict):
            problems.append(f"{path.name}:{lineno}: expected a JSON object {{...}}, got {json_kind(rec)}")
            continue
        yield lineno, rec, len(line)


def read_objects(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a (small) JSONL file with their line numbers (iter_objects); its
    problems raised together."""
    problems: list[str] = Problems()
    rows = list(iter_objects(path, problems))
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


def iter_jsonl(path: Path, problems: list[str], meter: Meter | None = None
               ) -> Iterator[tuple[int, dict[str, str]]]:
    """Objects of a JSONL file with their line numbers, values as text, one line at a time.

    Typed values are checked, never turned into text blindly: a string is kept, a number
    is written as in the file, null is an empty cell; a boolean, an array or an object is
    refused, like a key given twice, NaN and Infinity (iter_objects): each a line in `problems`.
    The caller reports the problems of reading JSON alone, as read_jsonl did.
    """
    syntax: list[str] = []
    for lineno, rec, size in _objects(path, syntax, meter):
        if set(map(type, rec.values())) <= {str}:  # the common case: every value a string
            if size > MAX_FIELD_CHARS and any(len(v) > MAX_FIELD_CHARS for v in rec.values()):
                problems.append(f"{path.name}:{lineno}: {field_limit()}")
                continue
            yield lineno, rec
            continue
        row: dict[str, str] = {}
        bad = False
        for k, v in rec.items():
            if v is None or isinstance(v, str):
                row[k] = v or ""
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = json.dumps(v)
            else:
                problems.append(f"{path.name}:{lineno}: field {k!r} must be text or a number, got {json_kind(v)}")
                bad = True
        if bad:
            continue
        if any(len(v) > MAX_FIELD_CHARS for v in row.values()):
            problems.append(f"{path.name}:{lineno}: {field_limit()}")
            continue
        yield lineno, row
    if syntax:
        problems[:] = syntax


def jsonl_columns(path: Path) -> list[str]:
    """Every key of a JSONL file's objects, in order of first appearance: a first pass that
    refuses (ImportProblems) a line that is not one JSON object, as iter_jsonl would."""
    problems: list[str] = Problems()
    header: dict[str, None] = {}
    seen = 0
    for _, rec, _ in _objects(path, problems, twice=False):
        seen += 1
        if len(header) < len(rec) or not header.keys() >= rec.keys():
            header.update(dict.fromkeys(rec))
    if problems:
        raise ImportProblems(problems)
    if not seen:
        raise ImportProblems([f"{path.name}: the file is empty"])
    return list(header)


def read_jsonl(path: Path) -> list[tuple[int, dict[str, str]]]:
    """Objects of a (small) JSONL file with their line numbers, values as text (iter_jsonl); its
    problems raised together."""
    problems: list[str] = Problems()
    rows = list(iter_jsonl(path, problems))
    if problems:
        raise ImportProblems(problems)
    return rows
