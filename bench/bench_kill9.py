"""Benchmark: the full kill -9 campaign over `pxp worker` processes on PostgreSQL (README "Workers over
PostgreSQL").

The suite kills a worker mid-repetition 3 times (tests/running/test_queue.py,
test_kill_9_workers_mid_repetition_loses_and_repeats_nothing); this runs the same test with 10 kills
and prints its wall time. It must pass: nothing is lost or repeated after any number of kills.

    python bench/bench_kill9.py [--kills 10] [--db URL]

--db names a PostgreSQL server (default: $PXP_TEST_POSTGRES_URL or the local one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from checkout import ROOT  # this checkout

TEST = "tests/running/test_queue.py::test_kill_9_workers_mid_repetition_loses_and_repeats_nothing"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--db", default=os.environ.get("PXP_TEST_POSTGRES_URL",
                                                   "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    a = ap.parse_args()
    env = {**os.environ, "PXP_TEST_KILLS": str(a.kills), "PXP_TEST_POSTGRES_URL": a.db, "CI": "true",
           "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", TEST], env=env, cwd=ROOT)
    print(f"kill -9 x {a.kills}: {'passed' if res.returncode == 0 else 'FAILED'} in {time.monotonic() - start:.0f} s")
    sys.exit(res.returncode)


if __name__ == "__main__":
    main()
