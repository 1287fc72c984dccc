"""Uploads on the Datasets page handed to pxp's importers (pxp.data.*).

Uploaded files are written to a private temporary folder (a zip is extracted with
every member checked to stay inside it), the importer validates everything and
stores nothing on error, and the outcome is a list of one-line messages.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from sqlalchemy import Engine

from pxp.data.importers.common import ImportProblems, Problems, shown_problems
from pxp.data.importers.zips import extract_zip
from pxp.errors import user_message
from pxp.storage.faults import is_database_error, shown_database


class Upload(Protocol):
    """What st.file_uploader returns (name and bytes)."""

    name: str

    def getvalue(self) -> bytes: ...


@dataclass
class ImportOutcome:
    ok: bool
    messages: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportKind:
    """One kind of import the page offers."""

    key: str
    title: str
    help: str
    main_types: tuple[str, ...]
    needs_images: bool = False
    module: str = ""
    function: str = ""

    def available(self) -> bool:
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            return False
        return hasattr(mod, self.function)


KINDS: tuple[ImportKind, ...] = (
    ImportKind("study_rad", "Chest X-ray study CSV (RAD)",
               "The study's CSV (case, label, report, img_path) plus its images as a zip or files.",
               ("csv",), True, "pxp.data.importers.study", "import_study_rad"),
    ImportKind("study_drug", "Retrosynthesis study CSV (DRUG)",
               "The study's CSV of targets, reactant SMILES and explanations.",
               ("csv",), False, "pxp.data.importers.study", "import_study_drug"),
    ImportKind("generic", "Any CSV or JSONL table",
               "One instance per row. Name the columns below when they are not already called "
               "key, input, image, prediction, explanation, split.",
               ("csv", "jsonl"), True, "pxp.data.importers.generic", "import_table"),
    ImportKind("dicom", "DICOM images (a zip)",
               "A zip of DICOM files, with an optional labels CSV (file,label[,report][,split]). "
               "Identifying tags are stripped before anything is stored.",
               ("zip",), False, "pxp.data.importers.dicom", "import_dicom"),
    ImportKind("task", "Custom task config (TOML or JSON)",
               "A task defined by a config (labels or free text, prompts, MATCH and AGREE), "
               "attached to an existing dataset.",
               ("toml", "json"), False, "pxp.tasks.custom", "load_task_config"),
    ImportKind("transcripts", "Transcripts (JSONL)",
               "One message per line: session, instance, j, sender, tag, prediction, explanation.",
               ("jsonl",), False, "pxp.data.importers.transcripts", "import_transcripts"),
)


def kind(key: str) -> ImportKind:
    for k in KINDS:
        if k.key == key:
            return k
    raise ImportProblems([f"unknown kind of import {key!r}"])


def stage(main: Upload, extras: Sequence[Upload], root: Path) -> Path:
    """Write the main file and the extra files (zips extracted) under `root`."""
    main_path = root / Path(main.name).name
    main_path.write_bytes(main.getvalue())
    for up in extras:
        name = Path(up.name).name
        data = up.getvalue()
        if name.lower().endswith(".zip"):
            extract_zip(data, root, name=name)
        else:
            (root / name).write_bytes(data)
    return main_path


IMAGE_TYPES = (".png", ".jpg", ".jpeg")
RAD_LAYOUT = (
    "Expected: the CSV (case, label, report, img_path) and its images, either as separate files or as "
    "one .zip of the images folder. Each `img_path` is matched by its file name, so a folder prefix "
    "(e.g. images/ or C:\\study\\images\\) need not match; file names must then be unique."
)


def match_images(csv_path: Path, root: Path) -> Path:
    """The study CSV with every `img_path` that is not found under `root` pointed at the
    uploaded image of the same file name (when exactly one has it).

    Uploads lose their folders (separate files) or carry another prefix (a zip of the
    images folder); the CSV is rewritten under the same name, row for row, so the
    importer's `file:line` messages still name the uploaded CSV's lines.
    """
    import csv

    by_name: dict[str, list[Path]] = {}
    for p in root.rglob("*"):
        if p.is_file() and p.suffix.lower() in IMAGE_TYPES:
            by_name.setdefault(p.name.lower(), []).append(p)
    text = csv_path.read_text(encoding="utf-8-sig", errors="replace")
    rows = list(csv.reader(text.splitlines(keepends=True)))
    if not rows or "img_path" not in [h.strip() for h in rows[0]]:
        return csv_path  # the importer reports the missing column
    col = [h.strip() for h in rows[0]].index("img_path")
    changed = False
    for r in rows[1:]:
        if col >= len(r) or not r[col].strip():
            continue
        given = r[col].strip().replace("\\", "/")
        if (root / given).is_file() and ".." not in PurePosixPath(given).parts:
            continue
        found = by_name.get(PurePosixPath(given).name.lower(), [])
        if len(found) == 1:
            r[col] = found[0].relative_to(root).as_posix()
            changed = True
    if not changed:
        return csv_path
    out = root / "matched" / csv_path.name
    out.parent.mkdir(exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return out


def _problems(err: Exception, engine: Engine) -> list[str]:
    probs = getattr(err, "problems", None)
    if isinstance(probs, list) and probs:
        return shown_problems(Problems([str(p) for p in probs], more=int(getattr(probs, "more", 0))))
    if is_database_error(err):  # the database named, never the driver's text (pxp.errors.user_message)
        return [user_message(err, shown_database(engine))]
    return [" ".join(str(err).split()) or type(err).__name__]


def run_import(
    engine: Engine, key: str, main: Upload, extras: Sequence[Upload] = (), *,
    name: str | None = None, options: dict[str, Any] | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> ImportOutcome:
    """Stage the uploads and call the importer; every problem is one line. `progress` (rows done,
    fraction read) follows the table importers (study CSVs, CSV/JSONL).

    options: generic — task, mapping (list of "column=field"), split; dicom — label,
    labels (a CSV name inside the zip or among the extras); task — dataset;
    transcripts — n, k, task.
    """
    k = kind(key)
    try:
        fn: Callable[..., Any] = getattr(importlib.import_module(k.module), k.function)
    except (ImportError, AttributeError):
        return ImportOutcome(False, [f"{k.title}: this importer is not installed yet"])
    opts = dict(options or {})
    with tempfile.TemporaryDirectory(prefix="pxp-upload-") as tmp:
        root = Path(tmp)
        try:
            if key == "dicom":
                stage_dir = root / "dicom"
                stage_dir.mkdir()
                stage(main, [main, *extras], stage_dir)  # the zip itself is extracted too
                (stage_dir / Path(main.name).name).unlink(missing_ok=True)
                labels = opts.get("labels")
                labels_path = None
                if labels:
                    found = [p for p in stage_dir.rglob(Path(str(labels)).name)]
                    if not found:
                        raise ImportProblems([f"no file named {labels!r} in the upload"])
                    labels_path = found[0]
                result = fn(engine, stage_dir, name=name or Path(main.name).stem,
                            label=opts.get("label") or None, labels=labels_path,
                            split=opts.get("split"))
            elif key == "task":
                path = stage(main, (), root)
                return _attach_task(engine, fn(path), str(opts.get("dataset") or ""))
            else:
                path = stage(main, extras, root)
                if key == "transcripts":
                    result = fn(engine, path, name=name or path.stem, n=int(opts.get("n", 10)),
                                k=int(opts.get("k", 3)), task=str(opts.get("task", "text")))
                elif key == "study_rad":
                    if extras:
                        path = match_images(path, root)
                    result = fn(engine, path, images_root=root if extras else None, name=name,
                                split=opts.get("split") or None, progress=progress)
                elif key == "generic":
                    result = fn(engine, path, task=str(opts.get("task") or "text"),
                                mapping=list(opts.get("mapping") or []), name=name,
                                split=opts.get("split"), images_root=root, progress=progress)
                else:
                    result = fn(engine, path, name=name, progress=progress)
        except Exception as err:
            return ImportOutcome(False, _problems(err, engine))
    summary = result.summary() if hasattr(result, "summary") else str(result)
    warnings = [str(w) for w in getattr(result, "warnings", [])]
    return ImportOutcome(True, [summary, *warnings])


def _references(db: Any, dataset_id: int) -> list[tuple[str, str]]:
    """(key, reference prediction) of a dataset's instances."""
    from sqlmodel import select

    from pxp.storage.tables import Instance

    rows = db.exec(select(Instance.key, Instance.reference_prediction).where(Instance.dataset_id == dataset_id))
    return [(str(k), str(p or "")) for k, p in rows.all()]


def _attach_task(engine: Engine, cfg: Any, dataset: str) -> ImportOutcome:
    """Store a validated custom task config with a dataset (Dataset.config["task_config"])."""
    from sqlmodel import Session as DB

    from pxp.storage.store import find_dataset
    from pxp.tasks.custom import dataset_fit

    with DB(engine) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None:
            return ImportOutcome(False, [f"no dataset named {dataset!r}: import its data first"])
        if (why := dataset_fit(cfg, ds.name, ds.task, _references(db, ds.id or 0))) is not None:
            return ImportOutcome(False, [why])
        ds.config = {**(ds.config or {}), "task_config": cfg.model_dump()}
        db.add(ds)
        db.commit()
    return ImportOutcome(True, [f"dataset {dataset!r} now uses task {cfg.name!r}"])
