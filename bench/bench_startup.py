"""Start-up of the `pxp` commands (docs/development.md, "Start-up"; goal: under half a second of wall time on 2 CPUs
when quiet): `python bench/bench_startup.py [--runs 7] [--all]`.

Each command runs in a fresh `python -m pxp.cli.main` process, RUNS times; the table gives the median wall
time and the median CPU time (user + system, steadier than wall on a shared machine) beside `python -c pass`
and `python -c "import sqlalchemy"`, the floor of any command that opens a database. The commands: `pxp --help`,
`pxp COMMAND --help` (report and run; every command with --all), `pxp doctor` on a missing database and on the demo
study (`pxp demo`, made first in a temporary folder), `pxp report`, `pxp validate`, `pxp export` (jsonl) and `pxp
calls` on it, and `pxp import csv` of a 2-row file into a copy of it (made again before each run).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkout import ROOT  # this checkout, on the import path

PXP = [sys.executable, "-m", "pxp.cli.main"]


def measure(cmd: list[str], runs: int, env: dict[str, str],
            prepare: Callable[[], None] | None = None) -> tuple[float, float]:
    """Median wall and CPU seconds of `cmd` over `runs` runs (the first, which fills the OS cache, is not counted);
    `prepare` runs before each, unmeasured."""
    walls, cpus = [], []
    for i in range(runs + 1):
        if prepare is not None:
            prepare()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - t
        if done.returncode not in (0, 1) or b"error:" in done.stderr:  # doctor exits 1 on a ✗ of the machine
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace')[-500:]}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--all", action="store_true", help="every command's --help, not only report's and run's")
    args = ap.parse_args()
    from pxp.cli.main import LAZY

    # bytecode written and read, as on a user's machine (an environment with PYTHONDONTWRITEBYTECODE, as this one,
    # would have every run compile pxp's modules again: 0.03-0.07 s more a command)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="120")
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/demo.db"
        subprocess.run([*PXP, "--db", db, "demo"], env=env, check=True, capture_output=True)
        exp = ("--experiment", "demo-rad-simulated")
        tiny, copy = Path(tmp) / "tiny.csv", Path(tmp) / "copy.db"
        tiny.write_text("id,text,answer\na1,What is 2+2?,four\na2,Capital of France?,Paris\n", encoding="utf-8")

        def fresh_copy() -> None:  # the import adds a new dataset each run, as a first import does
            shutil.copyfile(f"{tmp}/demo.db", copy)

        rows: list[tuple[str, list[str], Callable[[], None] | None]] = [
            ('python -c "pass"', [sys.executable, "-c", "pass"], None),
            ('python -c "import sqlalchemy"', [sys.executable, "-c", "import sqlalchemy"], None),
            ("pxp --help", [*PXP, "--help"], None),
            *[(f"pxp {name} --help", [*PXP, name, "--help"], None)
              for name in (LAZY if args.all else ("report", "run"))],
            ("pxp doctor (missing database)", [*PXP, "--db", f"sqlite:///{tmp}/missing.db", "doctor"], None),
            ("pxp doctor (demo study)", [*PXP, "--db", db, "doctor"], None),
            ("pxp report (demo study)", [*PXP, "--db", db, "report", *exp], None),
            ("pxp validate (demo study)", [*PXP, "--db", db, "validate"], None),
            ("pxp export (demo study, jsonl)", [*PXP, "--db", db, "export", *exp, "--out", f"{tmp}/out"], None),
            ("pxp calls (demo study)", [*PXP, "--db", db, "calls", *exp], None),
            ("pxp import csv (2 rows)", [*PXP, "--db", f"sqlite:///{copy}", "import", "csv", str(tiny), "--map",
                                         "id=key", "--map", "text=input", "--map", "answer=prediction",
                                         "--no-progress"], fresh_copy),
        ]
        print(f"| command | wall (median of {args.runs}) | CPU |")
        print("|---|---|---|")
        for label, cmd, prepare in rows:
            wall, cpu = measure(cmd, args.runs, env, prepare)
            print(f"| `{label}` | {wall:.2f} s | {cpu:.2f} s |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (quiet: below 1)")


if __name__ == "__main__":
    main()
