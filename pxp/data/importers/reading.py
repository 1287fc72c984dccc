"""Reading an input file in one pass, line by line, with flat memory (docs/development.md
"Imports at dataset scale"): the same refusals as reading it whole (too large, empty, not
UTF-8, NUL bytes), each naming its line, and a meter that reports progress.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from pxp.data.importers.common import ImportProblems, Problems, field_limit
from pxp.data.importers.limits import MAX_TABLE_BYTES

#: progress callback: rows done, fraction of the input read (0..1)
ProgressFn = Callable[[int, float], None]


class Meter:
    """Rows done and bytes read of one import; calls `report` at most every `every` seconds."""

    def __init__(self, report: ProgressFn | None = None, every: float = 0.25) -> None:
        self.report, self.every = report, every
        self.size = 0
        self.bytes = 0
        self.rows = 0
        self._last = 0.0

    @property
    def fraction(self) -> float:
        return min(1.0, self.bytes / self.size) if self.size else 0.0

    def tick(self, rows: int = 0, *, force: bool = False) -> None:
        """Count `rows` more rows done and report if it is time."""
        self.rows += rows
        if self.report is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            self.report(self.rows, self.fraction)


def row_hash(row: dict[str, str]) -> int:
    """A hash of an input row's cells, whatever their order (an identical row is imported once)."""
    return hash(frozenset(row.items()))


def csv_row_hash(row: dict[str, str]) -> int:
    """row_hash for a CSV row, whose cells always come in the header's order (quicker)."""
    return hash(tuple(row.values()))


def _size(path: Path) -> int:
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
    return size


def _blank(path: Path) -> bool:
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 16):
            if chunk.strip() and chunk.strip() != b"\xef\xbb\xbf":
                return False
    return True


_LONE_CR = re.compile(r"(?<=\r)(?!\n)")


def text_lines(path: Path, meter: Meter | None = None, *, cr: bool = False) -> Iterator[str]:
    """The file's lines (split at LF, and with `cr` at a lone CR too, as a CSV reader expects;
    line ends kept), decoded as UTF-8 with a BOM allowed.

    Refuses (ImportProblems, one line) a missing, too large or empty file, a line that is
    not UTF-8 and a NUL byte, naming the line; reads nothing twice and holds about 64 KiB.
    """
    size = _size(path)
    if meter is not None:
        meter.size = size
    if _blank(path):
        raise ImportProblems([f"{path.name}: the file is empty"])
    with path.open("rb") as fh:
        lineno = 0
        while lines := fh.readlines(1 << 16):  # about 64 KiB of whole lines at a time
            block = b"".join(lines)
            if meter is not None:
                meter.bytes += len(block)
            try:
                text = block.decode("utf-8-sig" if lineno == 0 else "utf-8")
            except UnicodeDecodeError:
                text = "\x00"
            if "\x00" in text:  # a line to name: the block again, a line at a time
                yield from _named_lines(path, fh, lines, lineno, cr)
            else:  # split at LF only, or (cr) at LF, CR LF and a lone CR, as a CSV reader expects
                yield from io.StringIO(text, newline="" if cr else "\n")
            lineno += len(lines)


def _named_lines(path: Path, fh: BinaryIO, lines: list[bytes], lineno: int, cr: bool) -> Iterator[str]:
    """The lines of a block holding a byte that is not UTF-8 or a NUL, up to the first such line,
    which is refused with its number (ImportProblems)."""
    for n, raw in enumerate(lines, start=lineno + 1):
        line = _decode(path, n, raw)
        if "\x00" in line:  # refused as before: a byte that is not UTF-8 anywhere is named first
            for later, rest in enumerate(itertools.chain(lines[n - lineno:], fh), start=n + 1):
                _decode(path, later, rest)
            raise ImportProblems([f"{path.name}:{n}: contains NUL bytes; not a text file"])
        if cr and "\r" in line and (line.count("\r") > 1 or not line.endswith("\r\n")):
            yield from _LONE_CR.split(line)  # a file with old Mac line ends
            continue
        yield line


def _decode(path: Path, lineno: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise ImportProblems([f"{path.name}:{lineno}: not UTF-8 text (byte 0x{raw[err.start]:02x}); "
                              "save the file as UTF-8"]) from None


def _csv_reason(err: Exception) -> str:
    msg = str(err)
    if "unexpected end of data" in msg:
        return "unclosed quote"
    if "field larger than field limit" in msg:
        return field_limit()
    return f"malformed CSV ({msg})"


class CsvRows:
    """A CSV file's header, then its rows one at a time with the line each starts on.

    The header is read and checked when made (unreadable, a column twice, a required column
    missing: ImportProblems); iterating notes in `problems` each row with more or fewer fields
    than the header and a quote left open (an importer reports these alone, as a file it
    cannot read), and skips blank rows.
    """

    def __init__(self, path: Path, *, required: Sequence[str] = (), label: str = "CSV",
                 meter: Meter | None = None) -> None:
        self.path, self.count = path, 0
        self.problems: list[str] = Problems()
        self._reader = csv.reader(text_lines(path, meter, cr=True), strict=True)
        try:
            header = next(self._reader)
        except (csv.Error, StopIteration) as err:
            raise ImportProblems([f"{path.name}:1: cannot read the {label} header "
                                  f"({_csv_reason(err)})"]) from None
        sep = re.fullmatch(r"\s*sep=(.?)\s*", ",".join(header), flags=re.IGNORECASE)
        if sep is not None:  # Excel's "sep=," first line: names the delimiter, the header follows
            if sep.group(1) not in (",", ""):
                raise ImportProblems([f"{path.name}:1: an Excel 'sep={sep.group(1)}' line: this file's fields "
                                      f"are separated by {sep.group(1)!r}; save it as CSV (comma delimited)"])
            try:
                header = next(self._reader)
            except (csv.Error, StopIteration) as err:
                raise ImportProblems([f"{path.name}:2: cannot read the {label} header after the Excel 'sep=,' "
                                      f"line ({_csv_reason(err)})"]) from None
        self.header = [h.strip() for h in header]
        twice = sorted({h for h in self.header if h and self.header.count(h) > 1})
        if twice:
            raise ImportProblems([f"{path.name}:1: column {', '.join(repr(h) for h in twice)} appears "
                                  "twice in the header; rename or drop one"])
        missing = [c for c in required if c not in self.header]
        if missing:
            raise ImportProblems([
                f"{path.name}:1: missing column(s) {', '.join(missing)} "
                f"(found: {', '.join(h for h in self.header if h) or 'none'})"
            ])

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        reader, header, name = self._reader, self.header, self.path.name
        width = len(header)
        start = reader.line_num + 1
        try:
            for record in reader:
                line = start
                start = reader.line_num + 1
                if len(record) != width:
                    if not record or all(not c.strip() for c in record):
                        continue
                    self.problems.append(f"{name}:{line}: {len(record)} fields but the header has "
                                         f"{width}; every row needs one field per column")
                    continue
                if not record[0].strip() and all(not c.strip() for c in record):
                    continue
                self.count += 1
                yield line, dict(zip(header, record, strict=True))
        except csv.Error as err:
            # strict parsing: a quote left open swallows the rest of the file, so refuse it
            # at the line where its row starts rather than read a merged row
            self.problems.append(f"{name}:{start}: {_csv_reason(err)}")
        if not self.count and not self.problems:
            self.problems.append(f"{name}: the file has a header but no rows")


def read_csv(path: Path, *, required: Sequence[str], label: str = "CSV") -> list[tuple[int, dict[str, str]]]:
    """The rows of a small CSV file (a labels or few-shot file) with their lines; the first
    problem found while reading (see CsvRows) is raised with the others."""
    rows = CsvRows(path, required=required, label=label)
    out = list(rows)
    if rows.problems:
        raise ImportProblems(rows.problems)
    return out
