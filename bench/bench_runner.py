"""Benchmark: R concurrent repetitions vs one repetition alone vs R one after another.

The machine is the simulated one with a fixed latency per call (it sleeps inside a slot of
the shared call limit, as an LLM call would), so the figures measure the runner's
scheduling, not a provider. Goal: R = 5 concurrent repetitions within 1.2 x one repetition.

    python bench/bench_runner.py [--reps 5] [--latency 0.02] [--concurrency 64] [--db URL]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import Engine

from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.demo import DEMO_RAD, ensure_demo
from pxp.running.pxp.controlled.repetition import run_repetition
from pxp.running.pxp.controlled.runner import default_agents, run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session, experiment_runs, make_engine, upgrade


def _cfg(reps: int, latency: float, concurrency: int, learn: bool) -> RunConfig:
    return RunConfig(dataset=DEMO_RAD, split="train", reps=reps, n=10, k=3, seed=0, learn=learn,
                     eval_at_start=True, concurrency=concurrency,
                     simulated={"latency": latency, "mislead": 0.2})


def concurrent(engine: Engine, name: str, cfg: RunConfig) -> float:
    exp = create_experiment(engine, cfg, name=name)
    t0 = time.perf_counter()
    out = run_experiment(engine, exp.id or 0)
    assert out.status == "finished", out
    return time.perf_counter() - t0


def sequential(engine: Engine, name: str, cfg: RunConfig) -> float:
    """The same repetitions, one after another (what the runner avoids)."""
    from pxp.llm.limits import set_call_limit

    exp = create_experiment(engine, cfg, name=name)
    set_call_limit(cfg.concurrency)
    with db_session(engine) as db:
        runs = experiment_runs(db, experiment_id=exp.id or 0)
    t0 = time.perf_counter()
    for run in runs:
        assert run_repetition(engine, exp, run, default_agents(engine, exp, run)) == "finished"
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.02, help="seconds per simulated call")
    ap.add_argument("--concurrency", type=int, default=64, help="shared LLM call limit")
    ap.add_argument("--no-learn", action="store_true")
    ap.add_argument("--db", help="database URL of a scratch database (default: a temporary SQLite file)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many timings per figure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        engine = make_engine(url)
        upgrade(engine)
        ensure_demo(engine)
        stamp = int(time.time())
        learn = not args.no_learn
        r, lat, lim = args.reps, args.latency, args.concurrency

        def best(label: str, fn: Callable[[Engine, str, RunConfig], float], cfg: RunConfig) -> float:
            return min(fn(engine, f"bench-{label}-{stamp}-{i}", cfg) for i in range(args.repeat))

        one = best("one", concurrent, _cfg(1, lat, lim, learn))
        many = best("many", concurrent, _cfg(r, lat, lim, learn))
        tight = best("tight", concurrent, _cfg(r, lat, r, learn))
        seq = best("seq", sequential, _cfg(r, lat, lim, learn))
        engine.dispose()
    backend = url.split(":", 1)[0]
    ratio = many / one
    print(f"runner bench ({backend}, demo-rad train split, n=10 k=3, LEARN {'on' if learn else 'off'}, "
          f"{args.latency * 1000:.0f} ms per simulated call, best of {args.repeat}, {os.cpu_count()} CPUs)")
    print(f"  one repetition alone           {one:7.2f} s")
    print(f"  R={args.reps} concurrent (limit {args.concurrency:>3})   {many:7.2f} s   {ratio:.2f} x one repetition")
    print(f"  R={args.reps} concurrent (limit {args.reps:>3})   {tight:7.2f} s   {tight / one:.2f} x one repetition")
    print(f"  R={args.reps} one after another          {seq:7.2f} s   {seq / one:.2f} x one repetition")
    print(f"  goal R={args.reps} <= 1.2 x one repetition: {'met' if ratio <= 1.2 else 'NOT met'} ({ratio:.2f})")
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
