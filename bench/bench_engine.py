"""Per-message overhead of the engine's step() in a simulated controlled run.

Prints p50/p95 (ms) of one step — load the session, decide the turn, ask the
simulated agent, tag, insert message + context in one transaction — at 100, 1,000
and 10,000 sessions, so growth with the size of the database is visible.
Goal: p50 <= 1 ms and flat.

    python bench/bench_engine.py [--db URL] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)

from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.engine import step
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.factory import make_agents
from pxp.storage.store import db_session, make_engine, run_sessions, upgrade
from pxp.storage.tables import Dataset, Experiment, Instance, Run

LABELS = ["Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax"]
INSTANCES = 100


def build(engine_url: str) -> None:
    engine = make_engine(engine_url)
    upgrade(engine)
    with db_session(engine) as db:
        ds = Dataset(name="bench", task="rad")
        db.add(ds)
        db.flush()
        for i in range(INSTANCES):
            lab = LABELS[i % 5]
            db.add(
                Instance(
                    dataset_id=ds.id or 0, key=f"b{i}", ordinal=i, label=lab, reference_prediction=lab,
                    reference_explanation=f"case {i} shows typical signs of {lab.lower()} on the film",
                )
            )


def measure(engine_url: str, sessions: int, seed: int) -> list[float]:
    engine = make_engine(engine_url)
    reps = max(1, sessions // INSTANCES)
    exp = create_experiment(engine, RunConfig(dataset="bench", reps=reps, seed=seed), name=f"bench-{sessions}-{seed}")
    times: list[float] = []
    with db_session(engine) as db:
        from sqlmodel import select

        runs = list(db.exec(select(Run).where(Run.experiment_id == exp.id)).all())
        e = db.get(Experiment, exp.id)
        assert e is not None
    for run in runs:
        agents = make_agents(engine, e, run)
        with db_session(engine) as db:
            sids = [s.id or 0 for s in run_sessions(db, run_id=run.id or 0)]
        for sid in sids:
            while True:
                t0 = time.perf_counter()
                r = step(engine, sid, agents)
                times.append((time.perf_counter() - t0) * 1000)
                if r.finished:
                    break
    engine.dispose()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="database URL (default: a temporary SQLite file)")
    ap.add_argument("--sizes", default="100,1000,10000")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    url = args.db or f"sqlite:///{Path(tmp.name) / 'bench.db'}"
    build(url)
    print(f"database: {url.split('@')[-1]}")
    print(f"{'sessions':>9} {'messages':>9} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for i, size in enumerate(int(s) for s in args.sizes.split(",")):
        t = measure(url, size, seed=i)
        q = statistics.quantiles(t, n=20)
        print(f"{size:>9} {len(t):>9} {statistics.median(t):>8.3f} {q[18]:>8.3f} {statistics.fmean(t):>8.3f}")


if __name__ == "__main__":
    main()
