"""Benchmark: `pxp validate` against `pxp report` on the same study (docs/development.md, "Reading a study";
goal: validate within 2× report's time, both in bounded memory).

    python bench/bench_validate.py                        # 70,000 sessions, SQLite and PostgreSQL
    python bench/bench_validate.py --sessions 100000 --db postgresql --runs 3
    python bench/bench_validate.py --url sqlite:///study.db   # a database already holding the study

The study is the one of tests/analysis/test_study_scale.py (`tests.factories.write_study`: aborted, ratified,
revised and rejected sessions, 2.3 messages a session, imported by `pxp import transcripts`, COPY on
PostgreSQL). Each command runs whole, in a fresh `python -m pxp.cli.main` process, RUNS times; each line gives
the median wall time, the median CPU time (user + system of the process) and the largest peak RSS, then
validate's ratio to report in wall and in CPU, and `pxp report --help` (the start-up both share).
PostgreSQL: PXP_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test); a fresh database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench_import import PgDatabase
from checkout import child_env

PXP = [sys.executable, "-m", "pxp.cli.main"]
#: the study file and its import, in a child: the bench's own process stays small, for a forked child's peak RSS
#: counts the memory it had before it became the command
BUILD = r"""
import sys, time
from pathlib import Path
from pxp.data.importers.transcripts import import_transcripts
from pxp.storage.store import make_engine, upgrade
from tests.factories import ABORTED, STUDY_SHAPES, write_study
url, study, sessions = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if not study.exists():
    write_study(study, sessions, reps=2, shapes=(*[ABORTED] * 4, *STUDY_SHAPES))
engine = make_engine(url)
upgrade(engine)
t = time.perf_counter()
assert import_transcripts(engine, study, name="S", n=10, k=3, task="rad").sessions == sessions
print(f"  (imported {sessions:,} sessions in {time.perf_counter() - t:.1f} s)", flush=True)
"""


def run_once(cmd: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[3:])} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(url: str, runs: int) -> dict[str, tuple[float, float, float]]:
    cmds = {"validate": [*PXP, "--db", url, "validate", "--experiment", "S"],
            "report": [*PXP, "--db", url, "report", "--experiment", "S"],
            "report --help": [*PXP, "report", "--help"]}
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
    for _ in range(runs):  # interleaved, so a busy moment of the machine falls on both
        for name, cmd in cmds.items():
            got[name].append(run_once(cmd))
    return {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), max(x[2] for x in v))
            for k, v in got.items()}


def build(url: str, study: Path, sessions: int) -> None:
    subprocess.run([sys.executable, "-c", BUILD, url, str(study), str(sessions)], check=True, env=child_env())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=70_000)
    ap.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--url", help="measure a database already holding the study (experiment S) instead")
    args = ap.parse_args()
    dbs = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    print(f"load average {os.getloadavg()[0]:.1f}; {args.sessions:,} sessions, median of {args.runs} runs")
    print("| database | command | wall | CPU | peak RSS |")
    print("|---|---|---|---|---|")
    if args.url:
        report(args.url.split(":")[0].split("+")[0], measure(args.url, args.runs))
        return
    with tempfile.TemporaryDirectory(prefix="pxp-bench-validate-") as tmp:
        study = Path(tmp) / "study.jsonl"
        for db in dbs:
            pdb = None
            if db == "sqlite":
                url = f"sqlite:///{tmp}/pxp-{uuid.uuid4().hex[:6]}.db"
            else:
                pdb = PgDatabase()
                url = pdb.url.replace("postgresql://", "postgresql+psycopg://")
            try:
                build(url, study, args.sessions)
                res = measure(url, args.runs)
            finally:
                if pdb is not None:
                    pdb.close()
            report(db, res)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def report(db: str, res: dict[str, tuple[float, float, float]]) -> None:
    for name, (wall, cpu, rss) in res.items():
        print(f"| {db} | `pxp {name}` | {wall:.2f} s | {cpu:.2f} s | {rss:.0f} MiB |")
    (vw, vc, _), (rw, rc, _) = res["validate"], res["report"]
    print(f"| {db} | validate / report | {vw / rw:.2f}× | {vc / rc:.2f}× | |", flush=True)


if __name__ == "__main__":
    main()
