"""Benchmark: Table 1 + Figure 1 over 100k sessions / ~1M messages (docs/research.md, Analytics; goal ≤ 1 s).

Generates one experiment (R repetitions of INTERACT-shaped sessions with random but
rule-shaped tag sequences) with bulk inserts into SQLite and into a scratch PostgreSQL
database, then times pxp.analysis (queries + tables) cold (empty cache) and warm (cached by data version).

    python bench/bench_analytics.py [--sessions 100000] [--reps 5] [--no-postgres]
        [--pg-url postgresql+psycopg://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import io
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import Engine, create_engine, text

from pxp.analysis import figures, queries, tables
from pxp.analysis.queries import Selection
from pxp.storage.store import make_engine, upgrade

TAGS_M = ("RATIFY", "REFUTE", "REVISE", "REJECT")


def tag_sequence(rng: random.Random, n: int, k: int) -> list[tuple[str, str]]:
    """A session shaped by INTERACT's stop rule: alternate senders, stop on both RATIFY,
    on REJECT, or at j = n; no REVISE at j = 2, no REJECT while j <= k."""
    seq = [("machine", "INIT")]
    last = {"machine": "INIT", "human": ""}
    for j in range(2, n + 1):
        sender = "human" if j % 2 == 0 else "machine"
        choices = [t for t in TAGS_M if not (t == "REVISE" and j == 2) and not (t == "REJECT" and j <= k)]
        weights = [{"RATIFY": 3, "REFUTE": 5, "REVISE": 3, "REJECT": 0.4}[t] for t in choices]
        tag = rng.choices(choices, weights)[0]
        seq.append((sender, tag))
        last[sender] = tag
        if tag == "REJECT" or (last["machine"] == "RATIFY" and last["human"] == "RATIFY"):
            break
    return seq


def generate(sessions: int, reps: int, n: int, k: int, seed: int = 7) -> tuple[list[Any], list[Any], int]:
    """Session rows (id, run_id, instance_id, ordinal, status, stop) and message rows."""
    rng = random.Random(seed)
    pool = [tag_sequence(rng, n, k) for _ in range(4000)]
    per_run = sessions // reps
    srows, mrows = [], []
    sid = 0
    for r in range(1, reps + 1):
        for o in range(1, per_run + 1):
            sid += 1
            status = "aborted" if rng.random() < 0.01 else "finished"
            seq = pool[rng.randrange(len(pool))]
            if status == "aborted":
                seq = seq[: rng.randint(1, len(seq))]
            srows.append((sid, r, o, o, status, None if status == "aborted" else "bound"))
            for j, (sender, tag) in enumerate(seq, start=1):
                mrows.append((sid, j, sender, "human" if sender == "machine" else "machine", tag))
    return srows, mrows, per_run


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def load_sqlite(path: Path, sessions: list[Any], messages: list[Any], per_run: int, reps: int, n: int,
                more: tuple[tuple[list[Any], list[Any]], ...] = ()) -> None:
    """One experiment of the rows; each of `more` (other rows of generate's shape) a further experiment on the
    same instances (experiments to compare)."""
    ts = NOW.strftime("%Y-%m-%d %H:%M:%S.%f")
    con = sqlite3.connect(path)
    with con:
        con.execute("INSERT INTO dataset (id, name, task, description, source, synthetic, config, created_at) "
                    "VALUES (1, 'bench', 'rad', '', '', 0, '{}', ?)", (ts,))
        con.executemany(
            "INSERT INTO instance (id, dataset_id, key, ordinal, payload, label, reference_prediction, "
            "reference_explanation, meta) VALUES (?, 1, ?, ?, '', ?, '', '', '{}')",
            ((i, f"x{i}", i, f"L{i % 5}") for i in range(1, per_run + 1)))
        for e, (rows, msgs) in enumerate(((sessions, messages), *more)):
            sid0, run0 = e * len(sessions), e * reps
            con.execute("INSERT INTO experiment (id, name, task, mode, status, n, k, config, created_at) "
                        "VALUES (?, ?, 'rad', 'controlled', 'finished', ?, 3, '{}', ?)",
                        (e + 1, "bench" if e == 0 else f"bench-{e + 1}", n, ts))
            con.executemany(
                "INSERT INTO run (id, experiment_id, repetition, seed, status, instance_order, created_at, "
                "updated_at) VALUES (?, ?, ?, 0, 'finished', '[]', ?, ?)",
                ((run0 + r, e + 1, r, ts, ts) for r in range(1, reps + 1)))
            con.executemany(
                "INSERT INTO session (id, run_id, instance_id, ordinal, n, k, status, stop_reason, created_at, "
                f"updated_at) VALUES (?, ?, ?, ?, {n}, 3, ?, ?, '{ts}', '{ts}')",
                ((sid0 + s[0], run0 + s[1], *s[2:]) for s in rows))
            con.executemany(
                "INSERT INTO message (session_id, j, sender, receiver, tag, prediction, explanation, created_at) "
                f"VALUES (?, ?, ?, ?, ?, '', '', '{ts}')", ((sid0 + m[0], *m[1:]) for m in msgs))
        con.execute("ANALYZE")
    con.close()


def _copy(cur: Any, table: str, cols: str, rows: Any) -> None:
    buf = io.StringIO()
    for r in rows:
        buf.write("\t".join("\\N" if v is None else str(v) for v in r) + "\n")
    with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as cp:
        cp.write(buf.getvalue())


def load_postgres(engine: Engine, sessions: list[Any], messages: list[Any], per_run: int, reps: int, n: int) -> None:
    ts = NOW.isoformat()
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("INSERT INTO dataset (id, name, task, description, source, synthetic, config, created_at) "
                    "VALUES (1, 'bench', 'rad', '', '', false, '{}', %s)", (ts,))
        _copy(cur, "instance", "id, dataset_id, key, ordinal, payload, label, reference_prediction, "
              "reference_explanation, meta",
              ((i, 1, f"x{i}", i, "", f"L{i % 5}", "", "", "{}") for i in range(1, per_run + 1)))
        cur.execute("INSERT INTO experiment (id, name, task, mode, status, n, k, config, created_at) "
                    "VALUES (1, 'bench', 'rad', 'controlled', 'finished', %s, 3, '{}', %s)", (n, ts))
        _copy(cur, "run", "id, experiment_id, repetition, seed, status, instance_order, created_at, updated_at",
              ((r, 1, r, 0, "finished", "[]", ts, ts) for r in range(1, reps + 1)))
        _copy(cur, "session", "id, run_id, instance_id, ordinal, n, k, status, stop_reason, created_at, updated_at",
              ((*s[:4], n, 3, *s[4:], ts, ts) for s in sessions))
        _copy(cur, "message", "session_id, j, sender, receiver, tag, prediction, explanation, created_at",
              ((*m, "", "", ts) for m in messages))
        raw.commit()
    finally:
        raw.close()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text("VACUUM ANALYZE"))  # what autovacuum does soon after a bulk load


def measure(label: str, engine: Engine, n: int, repeat: int = 3) -> None:
    """Cold (cache cleared) Table 1 + Figure 1 `repeat` times; then warm, and the version query.

    Wall time depends on what else the machine runs; the CPU time of this process does less.
    """
    sel = Selection(experiments=(1,))
    colds, cpus = [], []
    for _ in range(repeat):
        queries.clear_cache()
        t0, c0 = time.perf_counter(), time.process_time()
        t = tables.table1(engine, sel, n=n)
        figures.figure1({"bench": t})
        colds.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    t0 = time.perf_counter()
    tables.table1(engine, sel, n=n)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    queries.data_version(engine)
    ver = time.perf_counter() - t0
    rep = t.as_json("bench")
    print(f"{label:<10} Table 1 + Figure 1 cold: best {min(colds):.3f} s, median {statistics.median(colds):.3f} s "
          f"(this process's CPU: best {min(cpus):.3f} s; with SQLite that includes the query); "
          f"warm (cached) {warm * 1000:.1f} ms; data-version query {ver * 1000:.1f} ms"
          f"  | {rep['total_sessions']} sessions per repetition, {rep['repetitions']} repetitions, "
          f"2-way {rep['metrics']['two_way']['count']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()

    t0 = time.perf_counter()
    sessions, messages, per_run = generate(args.sessions, args.reps, args.n, 3)
    print(f"generated {len(sessions)} sessions, {len(messages)} messages in {time.perf_counter() - t0:.1f} s")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        engine = make_engine(f"sqlite:///{path}")
        upgrade(engine)
        t0 = time.perf_counter()
        load_sqlite(path, sessions, messages, per_run, args.reps, args.n)
        print(f"sqlite     loaded in {time.perf_counter() - t0:.1f} s")
        measure("sqlite", engine, args.n)
        engine.dispose()

    if args.no_postgres:
        return
    admin = create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
    name = f"pxp_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        engine = make_engine(admin.url.set(database=name).render_as_string(hide_password=False))
        upgrade(engine)
        t0 = time.perf_counter()
        load_postgres(engine, sessions, messages, per_run, args.reps, args.n)
        print(f"postgresql loaded in {time.perf_counter() - t0:.1f} s")
        measure("postgresql", engine, args.n)
        engine.dispose()
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
