"""Benchmark: a simulated 100-episode scorekeeping run, 50 ms injected latency per reply, concurrency 8.

The goal: it finishes within 1.3 × (longest episode's critical path × episodes / 8). An episode's
calls are sequential, so its critical path is its number of calls × the latency; the run stores every
episode (and its calls) in a fresh SQLite file, as `pxp scorekeeping run` does.
It then copies the stored episodes to 10,000 and times `pxp scorekeeping report`'s query and leaderboard
(goal: scoring 10,000 stored episodes under 2 s): only the small `scores` column is read.
Run: python bench/bench_scorekeeping_run.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import Engine, func, insert, select

from pxp.analysis.scorekeeping import report
from pxp.protocols.scorekeeping.instances import generate
from pxp.running.scorekeeping.runs import RunSettings, run_game
from pxp.storage.scorekeeping import SkCall, SkEpisode
from pxp.storage.store import make_engine, upgrade

EPISODES = 100
LATENCY_S = 0.05
CONCURRENCY = 8


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        upgrade(engine)
        insts = generate("travel-booking", n=EPISODES // 2) + generate("job-interview", n=EPISODES - EPISODES // 2)
        settings = RunSettings(name="bench", instances=insts, concurrency=CONCURRENCY, latency_s=LATENCY_S)
        t0 = time.perf_counter()
        res = run_game(engine, settings)
        elapsed = time.perf_counter() - t0
        calls = SkCall.__table__.c  # type: ignore[attr-defined]
        with engine.connect() as conn:
            per_episode = conn.execute(select(func.count()).select_from(SkCall.__table__)  # type: ignore[attr-defined]
                                       .group_by(calls.episode_key)).scalars().all()
        t_report = _report_10k(engine)
        engine.dispose()
    assert res.stored == EPISODES, res
    longest = max(per_episode) * LATENCY_S
    limit = 1.3 * longest * EPISODES / CONCURRENCY
    print(f"{EPISODES} episodes, {sum(per_episode)} calls, concurrency {CONCURRENCY}, {LATENCY_S * 1000:.0f} ms "
          f"latency: {elapsed:.2f} s (longest episode: {max(per_episode)} calls = {longest:.2f} s critical path; "
          f"limit 1.3 × {longest:.2f} × {EPISODES} / {CONCURRENCY} = {limit:.2f} s): "
          f"{'OK' if elapsed <= limit else 'TOO SLOW'}")
    print(f"report of {STORED} stored episodes (query + clembench leaderboard): {t_report:.3f} s "
          f"(limit 2 s): {'OK' if t_report < 2 else 'TOO SLOW'}")


STORED = 10_000


def _report_10k(engine: Engine) -> float:
    """Copy the run's episodes (whole rows, interactions included) up to STORED, then time the report."""
    e = SkEpisode.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        rows = [dict(r) for r in conn.execute(select(e)).mappings()]
        copies = []
        for i in range(STORED - len(rows)):
            r = {k: v for k, v in rows[i % len(rows)].items() if k != "id"}
            copies.append({**r, "episode": r["episode"] + 1000 * (1 + i // len(rows))})
        conn.execute(insert(e), copies)
    t0 = time.perf_counter()
    rep = report(engine, ["bench"])
    elapsed = time.perf_counter() - t0
    assert len(rep["episodes"]) == STORED
    return elapsed


if __name__ == "__main__":
    main()
