"""Cost of the Annotate submit's access check: `submit_as` (the holder checked before the step and
again in the write's transaction) against `submit_human` alone, on live sessions.

Prints p50/p95 (ms) of one human submit (message 2 after the simulated machine's message 1).

    python bench/bench_submit.py [--db URL] [--sessions 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)

from pxp.agents.base import Answer, Facts
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import load_session, machine_for, machine_step, submit_human
from pxp.storage.store import db_session, make_engine, upgrade
from pxp.storage.tables import Dataset, Instance
from pxp.team.access import submit_as


def measure(url: str, sessions: int, guarded: bool) -> list[float]:
    engine = make_engine(url)
    upgrade(engine)
    name = f"bench-submit-{'as' if guarded else 'plain'}-{time.time_ns()}"
    with db_session(engine) as db:
        ds = Dataset(name=name, task="rad")
        db.add(ds)
        db.flush()
        for i in range(sessions):
            db.add(Instance(dataset_id=ds.id or 0, key=f"b{i}", ordinal=i, label="Pneumonia",
                            reference_prediction="Pneumonia", reference_explanation="consolidation"))
    eid = create_live_experiment(engine, dataset=name)
    who = ensure_annotator(engine, name=f"{name}-ann")
    machine = machine_for(engine, eid)
    times = []
    for _ in range(sessions):
        sid = claim_next(engine, experiment_id=eid, annotator_id=who)
        assert sid is not None
        machine_step(engine, sid, machine)
        s = load_session(engine, sid)
        if s.j != 2 or s.turn is None:  # the machine's message ended the session: nothing to time
            continue
        first = s.messages[0]
        answer, facts = Answer(first.prediction, first.explanation), Facts(True, True, False)
        t = time.perf_counter()
        out = (submit_as(engine, sid, annotator_id=who, j=2, answer=answer, facts=facts) if guarded
               else submit_human(engine, sid, j=2, answer=answer, facts=facts))
        times.append((time.perf_counter() - t) * 1000)
        assert out.status == "sent", out
    engine.dispose()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="database URL (default: a temporary SQLite file)")
    ap.add_argument("--sessions", type=int, default=200)
    args = ap.parse_args()
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    for guarded in (False, True):
        ts = sorted(measure(url, args.sessions, guarded))
        label = "submit_as (checked)" if guarded else "submit_human (unchecked)"
        print(f"{label:26s} p50 {statistics.median(ts):6.2f} ms  p95 {ts[int(0.95 * (len(ts) - 1))]:6.2f} ms"
              f"  ({len(ts)} submits)")


if __name__ == "__main__":
    main()
