"""Start-up of the `pxp` commands (docs/development.md, "Start-up"; goal: 0.4 s of wall time on 2 CPUs when
quiet): `python bench/bench_startup.py [--runs 7] [--all]`.

Each command runs in a fresh `python -m pxp.cli.main` process, RUNS times; the table gives the median wall
time and the median CPU time (user + system, steadier than wall on a shared machine) beside `python -c pass`
and `python -c "import sqlalchemy"`, the floor of any command that opens a database. The commands: `pxp --help`,
`pxp COMMAND --help` (report and run; every command with --all), `pxp doctor` on a missing database, and
`pxp report` and `pxp validate` on the demo study (`pxp demo`, made first in a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PXP = [sys.executable, "-m", "pxp.cli.main"]


def measure(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall and CPU seconds of `cmd` over `runs` runs (the first, which fills the OS cache, is not counted)."""
    walls, cpus = [], []
    for i in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - t
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
        rows: list[tuple[str, list[str]]] = [
            ('python -c "pass"', [sys.executable, "-c", "pass"]),
            ('python -c "import sqlalchemy"', [sys.executable, "-c", "import sqlalchemy"]),
            ("pxp --help", [*PXP, "--help"]),
            *[(f"pxp {name} --help", [*PXP, name, "--help"]) for name in (LAZY if args.all else ("report", "run"))],
            ("pxp doctor (missing database)", [*PXP, "--db", f"sqlite:///{tmp}/missing.db", "doctor"]),
            ("pxp report (demo study)", [*PXP, "--db", db, "report", "--experiment", "demo-rad-simulated"]),
            ("pxp validate (demo study)", [*PXP, "--db", db, "validate"]),
        ]
        print(f"| command | wall (median of {args.runs}) | CPU |")
        print("|---|---|---|")
        for label, cmd in rows:
            wall, cpu = measure(cmd, args.runs, env)
            print(f"| `{label}` | {wall:.2f} s | {cpu:.2f} s |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (quiet: below 1)")


if __name__ == "__main__":
    main()
