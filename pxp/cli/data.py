"""Data commands: `pxp import study-rad|study-drug|csv|jsonl|dicom` and `pxp demo`.

Every importer validates the whole input before writing; on any problem each is
printed on its own line (file:line: reason) and nothing is stored (exit 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from pxp.cli.common import app, err, fail, import_app, named_path, out, state


def _run(call: Callable[[], Any]) -> None:
    """Run an importer; print its summary and warnings, or its problems one per line."""
    from pxp.data.importers.common import ImportProblems

    try:
        res = call()
    except ImportProblems as e:
        refuse(e.problems)
    out.print(f"imported {res.summary()}", highlight=False, markup=False, soft_wrap=True)
    for w in res.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)


def refuse(problems: list[str]) -> NoReturn:
    """Print an import's problems, one a line (the first 20, then their count), and exit 1."""
    from pxp.data.importers.common import shown_problems

    for p in shown_problems(problems):
        err.print(f"[red]error:[/red] {escape(p)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


@contextmanager
def import_progress(show: bool, console: Console | None = None, after: float = 1.0
                    ) -> Iterator[Callable[[int, float], None] | None]:
    """An importer's progress callback drawing rows done, rows per second and time left on
    `console` once the import has taken `after` seconds; None (no display) with --no-progress
    or when the console is not a terminal, as `pxp run` does."""
    console = console or err.real()
    if not show or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("importing"), BarColumn(), TextColumn("{task.fields[rows]:,} rows"),
                   TextColumn("{task.fields[rate]:,.0f} rows/s"), TimeRemainingColumn(), TextColumn("left"),
                   console=console, transient=True)
    task = bar.add_task("import", total=1.0, rows=0, rate=0.0)
    start, shown = time.monotonic(), False

    def report(rows: int, fraction: float) -> None:
        nonlocal shown
        elapsed = time.monotonic() - start
        if elapsed < after:
            return
        if not shown:
            bar.start()
            shown = True
        bar.update(task, completed=fraction, rows=rows, rate=rows / elapsed if elapsed else 0.0)

    try:
        yield report
    finally:
        if shown:
            bar.stop()


Progress = Annotated[bool, typer.Option(
    "--progress/--no-progress", help="Show rows done, rows/s and time left on stderr (a terminal only).")]
Split = Annotated[str | None, typer.Option("--split", help="train, val or test for every row.")]
Name = Annotated[str | None, typer.Option("--name", help="Dataset name (default: the file name).")]


@import_app.command("study-rad")
def import_study_rad_cmd(
    csv: Annotated[Path, typer.Argument(help="The study's X-ray CSV.", parser=named_path)],
    images_root: Annotated[Path | None, typer.Option(
        "--images-root", help="Folder img_path is relative to (default: the archive's root).", parser=named_path)
    ] = None,
    name: Name = None,
    split: Split = None,
    progress: Progress = True,
) -> None:
    """Import the study's X-ray CSV (case,label,label_short,img_path,report,link)."""
    from pxp.data.importers.study import import_study_rad

    with import_progress(progress) as report:
        _run(lambda: import_study_rad(state.engine(), csv, images_root=images_root, name=name,
                                      split=split, progress=report))


@import_app.command("study-drug")
def import_study_drug_cmd(
    csv: Annotated[Path, typer.Argument(help="The study's retrosynthesis CSV.", parser=named_path)],
    few_shot: Annotated[Path | None, typer.Option(
        "--few-shot", help="Few-shot examples CSV (output,input,explanation).", parser=named_path)] = None,
    name: Name = None,
    split: Split = None,
    progress: Progress = True,
) -> None:
    """Import the study's retrosynthesis CSV (output = reactants, input = target, explanation)."""
    from pxp.data.importers.study import import_study_drug

    with import_progress(progress) as report:
        _run(lambda: import_study_drug(state.engine(), csv, few_shot=few_shot, name=name,
                                       split=split, progress=report))


Task = Annotated[str, typer.Option("--task", help="rad, drug, text or a custom task name.")]
Map = Annotated[list[str] | None, typer.Option(
    "--map", help="COLUMN=FIELD (key, input, image, prediction, label, explanation, split); "
    "repeat for each column.")]
ImagesRoot = Annotated[Path | None, typer.Option(
    "--images-root", help="Folder image paths are relative to (default: the file's folder).", parser=named_path)]


def import_table_cmd(
    file: Annotated[Path, typer.Argument(help="One instance per row (CSV) or line (JSONL).", parser=named_path)],
    task: Task = "text",
    mapping: Map = None,
    name: Name = None,
    split: Split = None,
    images_root: ImagesRoot = None,
    progress: Progress = True,
    label_set: Annotated[str | None, typer.Option(
        "--labels", help="The rad task's label set, comma-separated (default: the study's five findings); "
        "a label outside it is refused.")] = None,
) -> None:
    """Import a CSV or JSONL file with a column mapping."""
    from pxp.data.importers.generic import import_table
    from pxp.data.match import label_set as labels_of
    from pxp.protocols.errors import PxpError

    chosen = None if label_set is None else label_set.split(",")
    if chosen is not None:  # the options checked together before anything is opened
        if task != "rad":
            fail(f"--labels is the rad task's label set; the {task!r} task has none (a custom task's labels are "
                 "in its config: `pxp task check`)")
        try:
            labels_of(chosen, file.name)
        except PxpError as e:
            fail(str(e))
    with import_progress(progress) as report:
        _run(lambda: import_table(state.engine(), file, task=task, mapping=mapping or [], name=name, split=split,
                                  images_root=images_root, progress=report, labels=chosen))


import_app.command("csv")(import_table_cmd)
import_app.command("jsonl")(import_table_cmd)


@import_app.command("dicom")
def import_dicom_cmd(
    folder: Annotated[Path, typer.Argument(
        help="Folder or zip of DICOM files (searched recursively).", parser=named_path)],
    name: Name = None,
    label: Annotated[str | None, typer.Option("--label", help="One label for every image.")] = None,
    labels: Annotated[Path | None, typer.Option(
        "--labels", help="CSV with file,label[,report][,split]; file relative to the folder.", parser=named_path)
    ] = None,
    report: Annotated[str, typer.Option("--report", help="Reference report for every image.")] = "",
    split: Split = None,
    skip_bad: Annotated[bool, typer.Option(
        "--skip-bad", help="Import the readable files and list the others.")] = False,
    log: Annotated[Path | None, typer.Option(
        "--log", help="Append pydicom's warnings about malformed files to this file.", parser=named_path)] = None,
) -> None:
    """Import DICOM images, de-identified (Basic Confidentiality Profile) before storing."""
    import logging

    from pxp.data.importers.dicom import import_dicom
    from pxp.data.importers.dicom import log as dicom_log

    handler: logging.Handler | None = None
    if log is not None:
        handler = logging.FileHandler(log, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        dicom_log.addHandler(handler)
    try:
        _run(lambda: import_dicom(state.engine(), folder, name=name, label=label, labels=labels,
                                  report=report, split=split, skip_bad=skip_bad))
    finally:
        if handler is not None:
            dicom_log.removeHandler(handler)
            handler.close()


@app.command("demo")
def demo_cmd(
    films: Annotated[bool, typer.Option(
        "--films", help="Also make demo-rad-films: five 2048-px 12-bit DICOM chest films with lung, soft-tissue "
        "and bone windows (about 15 s).")] = False,
) -> None:
    """Load the demo datasets made by pxp and a finished simulated experiment on each."""
    from pxp.data.importers.common import ImportProblems
    from pxp.running.pxp.controlled.demo import DEMO_EXPERIMENTS, DEMO_FILMS, add_demo, demo_state

    half = False
    try:
        engine = state.engine(atomic=True)
        half = demo_state(engine) == "half"
        made, loaded = add_demo(engine, films=films, direct=state.created is not None)
    except ImportProblems as e:
        refuse(e.problems)
    except typer.Exit:
        raise
    except Exception as e:  # a full disk, a lost database: named with the database, and what is left of it
        from pxp.errors import user_message

        left = ("what was made is kept, and `pxp demo` again finishes it" if half and not state.emptied else
                "nothing of it was kept")
        fail(f"{state.where()}: the demo was not made ({user_message(e)}); {left}")
    state.keep()  # a new database: renamed into place (and said so) only now that all of it is made
    if made:
        out.print(f"made {DEMO_FILMS}: five synthetic 2048 × 2048 12-bit DICOM chest films", highlight=False,
                  markup=False, soft_wrap=True)
    exps = ", ".join(DEMO_EXPERIMENTS.values())
    if loaded:
        line = ("loaded the demo: datasets demo-rad (synthetic chest X-ray phantoms) and "
                f"demo-drug, simulated experiments {exps}")
    else:
        line = f"the demo is already loaded (demo-rad, demo-drug; {exps})"
    out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print("try: pxp report --experiment demo-rad-simulated", highlight=False, markup=False,
              soft_wrap=True)


# --- import transcripts ------------------------------------------------------------------


@import_app.command("transcripts")
def import_transcripts_cmd(
    file: Annotated[Path, typer.Argument(help="JSONL, one message per line.", parser=named_path)],
    name: Annotated[str, typer.Option("--name", help="Name of the experiment to create.")],
    n: Annotated[int, typer.Option("--n", help="Message bound n.")] = 10,
    k: Annotated[int, typer.Option("--k", help="REJECT allowed after message k.")] = 3,
    task: Annotated[str, typer.Option("--task", help="Task of the instances (rad, drug, text).")] = "text",
    allow_nonconformant: Annotated[bool, typer.Option("--allow-nonconformant")] = False,
) -> None:
    """Import transcripts as an experiment; refuses non-conformant sessions."""
    from pxp.data.importers.common import ImportProblems
    from pxp.data.importers.transcripts import import_transcripts

    try:
        res = import_transcripts(state.engine(), file, name=name, n=n, k=k, task=task,
                                 allow_nonconformant=allow_nonconformant)
    except ImportProblems as e:
        refuse(e.problems)
    out.print(
        escape(f"imported {res.sessions} sessions ({res.messages} messages) as experiment {res.experiment!r}"),
        highlight=False,
        soft_wrap=True,
    )
    from pxp.data.importers.common import shown_problems

    for p in shown_problems(res.nonconformant):
        err.print(f"[yellow]warning:[/yellow] {escape(p)}", highlight=False, soft_wrap=True)
