"""What every importer shares: the problems error, the instance waiting to be stored, the
result, task and split checks (DESIGN §4, §6).

An importer reads its input in one pass (pxp.data.importers.reading), collecting one problem
line (file:line: reason) per fault while its instances stream into the database in one
transaction (pxp.data.importers.stage); if there is any problem it raises ImportProblems and
nothing is kept. Storing is idempotent: an instance is identified by (dataset, key), so
importing the same file again adds nothing.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Engine, select

from pxp.data.images import PreparedImage
from pxp.data.importers.limits import MAX_FIELD_CHARS
from pxp.protocols.errors import PxpError
from pxp.storage import core_tables

SPLITS = ("train", "val", "test")

csv.field_size_limit(MAX_FIELD_CHARS)
T = TypeVar("T")


#: the problems an import keeps (in the order found); later ones are only counted, so a file of bad rows
#: takes no more memory than a good one
KEPT_PROBLEMS = 1_000


class Problems(list[T]):
    """An import's problems as found: the first KEPT_PROBLEMS kept, the rest counted in `more`."""

    def __init__(self, found: Iterable[T] = (), more: int = 0) -> None:
        super().__init__()
        self.more = more
        self.extend(found)

    def append(self, problem: T) -> None:
        if len(self) < KEPT_PROBLEMS:
            super().append(problem)
        else:
            self.more += 1

    def extend(self, found: Iterable[T]) -> None:
        for problem in found:
            self.append(problem)

    def __iadd__(self, found: Iterable[T]) -> Problems[T]:  # type: ignore[override,misc]  # list's returns list
        self.extend(found)
        return self


def problem_count(problems: Sequence[object]) -> int:
    """How many problems were found, the counted-only ones included."""
    return len(problems) + int(getattr(problems, "more", 0))


class ImportProblems(PxpError, ValueError):
    """Everything wrong with an input file, one line per problem (nothing was written); `more` counts
    those found past KEPT_PROBLEMS."""

    def __init__(self, problems: list[str], more: int = 0) -> None:
        self.problems = Problems(problems, more + int(getattr(problems, "more", 0)))
        super().__init__("; ".join(problems[:5]) + (" ..." if problem_count(self.problems) > 5 else ""))


#: the problems an import shows one per line; the rest are counted on one more line
SHOWN_PROBLEMS = 20


def shown_problems(problems: Sequence[str]) -> list[str]:
    """The lines that show an import's problems (CLI and app alike): the first SHOWN_PROBLEMS, each
    naming its file and line, then one line counting the rest."""
    rest = problem_count(problems) - SHOWN_PROBLEMS
    if rest <= 0:
        return list(problems)
    return [*list(problems)[:SHOWN_PROBLEMS],
            f"... and {rest:,} more problem{'s' if rest > 1 else ''} not shown (fix these and import again)"]


@dataclass(slots=True)
class NewInstance:
    """A validated instance waiting to be stored; `line` and `row_hash` (of the input row) tell a
    repeated key from an identical row (pxp.data.importers.stage)."""

    key: str
    split: str | None = None
    image: PreparedImage | None = None
    payload: str = ""
    label: str = ""
    reference_prediction: str = ""
    reference_explanation: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    extra_assets: list[PreparedImage] = field(default_factory=list)
    line: int = 0
    row_hash: int = 0


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


BUILTIN_TASKS = ("rad", "drug", "text")


def check_task(engine: Engine, task: str) -> str:
    """The task name if known (built in, or already the task of a stored dataset)."""
    name = (task or "").strip().lower()
    with engine.connect() as conn:
        stored = sorted({str(t) for t in conn.execute(select(core_tables.dataset.c.task)).scalars()}
                        - set(BUILTIN_TASKS))
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


def field_limit() -> str:
    """The one text limit, as an import error names it."""
    return f"a field is longer than the {MAX_FIELD_CHARS:,}-character limit for a text field; shorten it"
