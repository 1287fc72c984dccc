"""Benchmark: repetitions over 4 `pxp worker` processes against 1, on PostgreSQL (docs/operations.md, Workers).

N simulated sessions in E experiments of R repetitions (one queue job per repetition), the
simulated machine sleeping `--latency` seconds per call inside a slot of the call limit, as an
LLM call would (see bench_runner.py). The same experiments run (a) over 1 worker, (b) over
4 workers, (c) in-process (run_experiment), each with the same seeds; Table 1 (the report's
JSON) must be identical. Goal: speedup >= 3.5x with 4 workers. With R jobs per
experiment and W workers the ideal is jobs / ceil(jobs / W), so E * R should be a multiple of 4.

    python bench/bench_workers.py [--sessions 10000] [--experiments 4] [--reps 5] [--latency 0.05] [--db URL]

--db names a PostgreSQL server (any database on it): a scratch database is created beside it
and dropped at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from checkout import ROOT  # this checkout, on the import path
from sqlalchemy import Engine, create_engine, text

from pxp.analysis.report import report_json
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.workers.queue import enqueue, ensure_schema
from pxp.running.workers.queue_wait import run_distributed
from pxp.storage.store import db_session, make_engine, upgrade
from pxp.storage.tables import Dataset, Instance

PXP = [sys.executable, "-c", "from pxp.cli.main import main; main()"]
LABELS = ["Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax"]
DEFAULT_DB = os.environ.get("PXP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _dataset(engine: Engine, train: int, val: int, test: int) -> None:
    """A synthetic RAD dataset: `train` instances to interact on, small fixed val and test splits."""
    with db_session(engine) as db:
        ds = Dataset(name="bench-rad", task="rad", synthetic=True)
        db.add(ds)
        db.flush()
        splits = ["train"] * train + ["val"] * val + ["test"] * test
        for o, split in enumerate(splits, start=1):
            lab = LABELS[o % len(LABELS)]
            db.add(Instance(dataset_id=ds.id or 0, key=f"case_{o}", ordinal=o, split=split, label=lab,
                            reference_prediction=lab, reference_explanation=f"Case {o}: findings of {lab.lower()}."))


def _cfg(seed: int, reps: int, latency: float) -> RunConfig:
    return RunConfig(dataset="bench-rad", split="train", reps=reps, n=10, k=3, seed=seed, learn=True,
                     concurrency=8, simulated={"latency": latency, "mislead": 0.2})


def _table1(engine: Engine, name: str) -> dict[str, Any]:
    rep = report_json(engine, name)
    rep.pop("experiment")
    return rep


def _start_workers(url: str, n: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return [subprocess.Popen([*PXP, "--db", url, "worker", "--name", f"bench-{i}"], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(n)]


def _wait_registered(engine: Engine, n: int, timeout: float = 60) -> None:
    q = text("select count(*) from procrastinate_workers where last_heartbeat > now() - interval '5 seconds'")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if int(conn.execute(q).scalar_one()) >= n:
                return
        time.sleep(0.1)
    raise SystemExit(f"only some of the {n} workers started within {timeout:.0f} s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=60)


def distributed(engine: Engine, url: str, label: str, workers: int, cfgs: list[RunConfig]) -> tuple[float, list[str]]:
    """Wall time from queueing the experiments to their last repetition's end, over `workers` workers."""
    procs = _start_workers(url, workers)
    try:
        _wait_registered(engine, workers)
        exps = [create_experiment(engine, c, name=f"{label}-{i}") for i, c in enumerate(cfgs)]
        t0 = time.perf_counter()
        for e in exps:
            enqueue(engine, e.id or 0)
        for e in exps:
            assert run_distributed(engine, e.id or 0).status == "finished", e.name
        return time.perf_counter() - t0, [e.name for e in exps]
    finally:
        _stop(procs)


def in_process(engine: Engine, cfgs: list[RunConfig]) -> tuple[float, list[str]]:
    exps = [create_experiment(engine, c, name=f"inproc-{i}") for i, c in enumerate(cfgs)]
    t0 = time.perf_counter()
    for e in exps:
        assert run_experiment(engine, e.id or 0).status == "finished", e.name
    return time.perf_counter() - t0, [e.name for e in exps]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000, help="N sessions in all")
    ap.add_argument("--experiments", type=int, default=4, help="E experiments (each R jobs)")
    ap.add_argument("--reps", type=int, default=5, help="R repetitions per experiment")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per simulated call")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--db", default=DEFAULT_DB, help="a PostgreSQL URL (a scratch database is made beside it)")
    args = ap.parse_args()
    per_rep = max(1, args.sessions // (args.experiments * args.reps))
    admin = create_engine(args.db, isolation_level="AUTOCOMMIT")
    scratch = f"pxp_bench_{uuid.uuid4().hex[:10]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{scratch}"'))
    url = admin.url.set(database=scratch).render_as_string(hide_password=False)
    engine = make_engine(url)
    try:
        upgrade(engine)
        ensure_schema(engine)
        _dataset(engine, per_rep, 5, 5)
        cfgs = [_cfg(seed, args.reps, args.latency) for seed in range(args.experiments)]
        one, names1 = distributed(engine, url, "w1", 1, cfgs)
        many, names4 = distributed(engine, url, f"w{args.workers}", args.workers, cfgs)
        local, names0 = in_process(engine, cfgs)
        same = all(_table1(engine, a) == _table1(engine, b) == _table1(engine, c)
                   for a, b, c in zip(names1, names4, names0, strict=True))
    finally:
        engine.dispose()
        with admin.connect() as c:
            c.execute(text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{scratch}' "
                           "AND pid <> pg_backend_pid()"))
            c.execute(text(f'DROP DATABASE IF EXISTS "{scratch}"'))
        admin.dispose()
    jobs = args.experiments * args.reps
    ideal = jobs / math.ceil(jobs / args.workers)
    speedup = one / many
    total = per_rep * jobs
    print(f"workers bench (PostgreSQL, {total} simulated sessions = {args.experiments} experiments x R={args.reps} "
          f"x {per_rep} sessions, n=10 k=3, LEARN on, {args.latency * 1000:.0f} ms per call, {os.cpu_count()} CPUs)")
    print(f"  1 worker                  {one:8.2f} s")
    print(f"  {args.workers} workers                 {many:8.2f} s   speedup {speedup:.2f} x (ideal {ideal:.2f} x)")
    print(f"  in-process (run_experiment, one experiment after another) {local:8.2f} s")
    print(f"  Table 1 identical to the in-process run with the same seeds: {'yes' if same else 'NO'}")
    print(f"  goal speedup >= 3.5 x: {'met' if speedup >= 3.5 else 'NOT met'} ({speedup:.2f})")
    return 0 if same and speedup >= 3.5 else 1


if __name__ == "__main__":
    sys.exit(main())
