"""Benchmark: scoring 10,000 stored scorekeeping episodes (goal: under 2 s).

Episodes are played once by the simulated answerer and stored as JSON text holding what scoring reads
(interactions.json without the `turns` event log and `players`: probes, realised slots, counts, flags);
timed: json.loads + clembench scores + leaderboard. For information it also times whole interactions.json
files with full validation (from_interactions), which the 2 s figure does not cover.
Run: python bench/bench_scorekeeping.py
"""

from __future__ import annotations

import json
import time

import checkout  # noqa: F401  (this checkout on the import path)

from pxp.protocols.scorekeeping.episode import from_interactions, play_episode
from pxp.protocols.scorekeeping.instances import generate
from pxp.protocols.scorekeeping.scores import leaderboard, score_interactions
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer

N = 10_000
LIMIT_S = 2.0


def main() -> None:
    insts = generate("travel-booking", n=10) + generate("job-interview", n=10)
    agents = [SimulatedAnswerer(seed=s, probe_accuracy=0.85, slot_accuracy=0.9, format_error_rate=0.01)
              for s in range(25)]
    logs = [play_episode(i, a).to_interactions() for a in agents for i in insts]
    stored = [json.dumps({k: v for k, v in d.items() if k not in ("turns", "players")}) for d in logs]
    texts = [stored[k % len(stored)] for k in range(N)]
    full = [json.dumps(logs[k % len(logs)]) for k in range(N // 10)]
    t0 = time.perf_counter()
    scored = [score_interactions(json.loads(t))["episode scores"] for t in texts]
    t_scores = time.perf_counter() - t0
    board = leaderboard(("sim", s) for s in scored)
    t_board = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t in full:
        score_interactions(from_interactions(json.loads(t)).to_interactions())
    t_validated = (time.perf_counter() - t0) * N / len(full)
    print(f"scored {N} stored episodes in {t_scores:.3f} s (with leaderboard {t_board:.3f} s; "
          f"limit {LIMIT_S} s): {'OK' if t_board < LIMIT_S else 'TOO SLOW'}")
    print(f"whole interactions.json files with validation: {t_validated:.3f} s per {N} (from {len(full)})")
    print(f"leaderboard: {board}")


if __name__ == "__main__":
    main()
