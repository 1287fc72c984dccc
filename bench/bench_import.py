"""Benchmark: imports at dataset scale against the database's own floor (docs/development.md,
"Imports at dataset scale").

    python bench/bench_import.py                 # 10k, 100k, 1M rows; SQLite and PostgreSQL
    python bench/bench_import.py --quick         # 10k and 100k rows, SQLite only
    python bench/bench_import.py --sizes 200000 --db sqlite --kinds csv
    python bench/bench_import.py --sizes 20000 --kinds realistic   # 20,000 sessions of 3-10 messages

Each line: rows, pxp's wall time (the import alone, in a child process whose start-up and
schema set-up are not counted), the floor's wall time, their ratio, pxp's rows per second
and the child's peak memory (RSS), then the CPU time of pxp's import and of the floor (their own process's,
not the database server's) and their ratio, steadier than wall time on a busy machine; with --reimport the
same file imported again (transcripts: as a second experiment). The floor is a plain Python stream of the
same rows into a table with the same columns and a unique (dataset, key) index: `csv.DictReader` (CSV) or
`json.loads` (JSONL, transcripts) into `sqlite3.executemany`, or PostgreSQL `COPY`.
Transcripts: `--sizes` counts messages, three per session; realistic transcripts (`--kinds realistic`):
`--sizes` counts sessions, of 3 to 10 messages each (6.5 on average: ratified at once, refuted and revised
then ratified, or rejected after revisions), with explanations of about 300 characters.
PostgreSQL: PXP_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test); each run gets a fresh database.
With --replay (transcripts on PostgreSQL): beside the floor, the database's own cost of the rows pxp stored, the
first import's sessions and messages sent again by one `COPY` each, their text made beforehand and no Python
between, into a new database with pxp's schema (the rows they name copied first, not timed): its wall time, its
ratio to the floor, and the server's CPU for it and for the floor (the backends', from /proc: run the bench on the
database's machine); then the same replay without the foreign keys' checks (a superuser's
`session_replication_role = replica` on the replay's connection, never in pxp), which tells what the keys cost.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from checkout import child_env

PG = os.environ.get("PXP_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
COLUMNS = ("key", "input", "label", "explanation", "split")
FLOOR_DDL = ("CREATE TABLE inst (id INTEGER PRIMARY KEY, dataset_id INTEGER, key TEXT, payload TEXT, "
             "label TEXT, explanation TEXT, split TEXT, meta TEXT)")
FLOOR_INDEX = "CREATE UNIQUE INDEX uq_inst ON inst (dataset_id, key)"
WORDS = ["the", "a", "lung", "opacity", "left", "right", "lower", "lobe", "consolidation", "effusion",
         "small", "large", "no", "acute"]


def text_row(i: int) -> dict[str, str]:
    w = [WORDS[(i * k) % len(WORDS)] for k in range(1, 24)]
    return {"key": f"r{i}", "input": " ".join(w[:10]) + f" {i}", "label": WORDS[i % 5],
            "explanation": " ".join(w) + f" because of finding {i % 97}.", "split": ("train", "val", "test")[i % 3]}


LABELS = ("Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax")


def explanation(s: int, j: int) -> str:
    """About 300 characters of a radiologist's reasoning, different for each session and message."""
    w = [WORDS[(s * 7 + j * 3 + i * i) % len(WORDS)] for i in range(40)]
    return (f"Message {j} of case {s}: " + " ".join(w) + f"; compared with the prior film the {w[3]} {w[5]} "
            f"{w[8]} is {('unchanged', 'larger', 'smaller')[(s + j) % 3]}, so the finding stands as read.")[:300]


def realistic_session(s: int) -> list[dict[str, Any]]:
    """Session s of 3 + s % 8 messages, conformant with n = 10, k = 3 (DESIGN §1): three ratified at once; an odd
    length the human refutes, both revise, the machine comes round and both ratify; an even one ends in REJECT."""
    length = 3 + s % 8
    a, b = LABELS[s % 5], LABELS[(s + 2) % 5]
    msgs = [("machine", "INIT", a, explanation(s, 1))]
    if length == 3:
        msgs += [("human", "RATIFY", a, explanation(s, 2)), ("machine", "RATIFY", a, explanation(s, 3))]
    else:
        last = length - 3 if length % 2 else length - 1  # the revisions before the ending
        msgs.append(("human", "REFUTE", b, explanation(s, 2)))
        for j in range(3, last + 1):
            msgs.append(("machine" if j % 2 else "human", "REVISE", a if j % 2 else b, explanation(s, j)))
        if length % 2:  # the machine takes the human's answer, then both ratify, each repeating its last message
            msgs += [("machine", "REVISE", b, explanation(s, length - 2)),
                     ("human", "RATIFY", b, msgs[length - 4][3]), ("machine", "RATIFY", b, explanation(s, length - 2))]
        else:
            msgs.append(("human", "REJECT", b, explanation(s, length)))
    return [{"session": f"s{s}", "instance": f"x{s % 5000}", "j": j, "sender": sender, "tag": tag,
             "prediction": pred, "explanation": expl, "annotator": f"a{s % 7}"}
            for j, (sender, tag, pred, expl) in enumerate(msgs, start=1)]


def write_realistic(folder: Path, sessions: int) -> tuple[Path, int]:
    """The realistic transcripts file of `sessions` sessions, and its number of messages."""
    path, messages = folder / f"realistic{sessions}.jsonl", 0
    with path.open("w") as f:
        for s in range(sessions):
            for rec in realistic_session(s):
                f.write(json.dumps(rec) + "\n")
                messages += 1
    return path, messages


def write_inputs(folder: Path, n: int) -> dict[str, Path]:
    paths = {"csv": folder / f"rows{n}.csv", "jsonl": folder / f"rows{n}.jsonl",
             "transcripts": folder / f"msgs{n}.jsonl"}
    with paths["csv"].open("w", newline="") as fc, paths["jsonl"].open("w") as fj:
        w = csv.DictWriter(fc, COLUMNS)
        w.writeheader()
        for i in range(n):
            r = text_row(i)
            w.writerow(r)
            fj.write(json.dumps(r) + "\n")
    with paths["transcripts"].open("w") as ft:
        for i in range(n - n % 3):  # whole sessions of three messages
            s, j = divmod(i, 3)
            tag = ("INIT", "RATIFY", "RATIFY")[j]
            ft.write(json.dumps({"session": f"s{s}", "instance": f"x{s}", "j": j + 1,
                                 "sender": ("machine", "human", "machine")[j], "tag": tag,
                                 "prediction": "Pneumonia", "explanation": f"opacity in the lower lobe {s}"}) + "\n")
    return paths


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from pxp.storage.store import make_engine, upgrade
kind, url, path = sys.argv[1], sys.argv[2], Path(sys.argv[3])
engine = make_engine(url)
upgrade(engine)
if kind in ("transcripts", "realistic"):
    from pxp.data.importers.transcripts import import_transcripts
    run = lambda i: import_transcripts(engine, path, name=f"bench{i}", task="text", n=10, k=3)
else:
    from pxp.data.importers.generic import import_table
    run = lambda i: import_table(engine, path, task="text", mapping=["label=prediction"], name="bench")
times, cpu = [], []
for i in range(int(sys.argv[4])):
    t, c = time.perf_counter(), time.process_time()
    run(i)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"times": times, "cpu": cpu, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def pxp_run(kind: str, url: str, path: Path, repeat: int = 1) -> tuple[list[float], float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, url, str(path), str(repeat)],
                         capture_output=True, text=True, check=False, env=child_env())
    if out.returncode:
        raise SystemExit(f"pxp import failed: {out.stderr.strip().splitlines()[-1:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["times"], res["rss"], res["cpu"][0]


def floor_rows(kind: str, path: Path):  # type: ignore[no-untyped-def]
    if kind == "csv":
        with path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                yield (1, r["key"], r["input"], r["label"], r["explanation"], r["split"], "{}")
    else:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if kind in ("transcripts", "realistic"):
                    yield (1, f"{r['session']}:{r['j']}", r["instance"], r["tag"], r["explanation"],
                           r["sender"], "{}")
                else:
                    yield (1, r["key"], r["input"], r["label"], r["explanation"], r["split"], "{}")


def floor_sqlite(kind: str, path: Path, folder: Path) -> tuple[float, float]:
    db = folder / f"floor-{uuid.uuid4().hex[:6]}.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(FLOOR_DDL)
    con.execute(FLOOR_INDEX)
    con.commit()
    t, c = time.perf_counter(), time.process_time()
    con.executemany("INSERT INTO inst (dataset_id, key, payload, label, explanation, split, meta) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", floor_rows(kind, path))
    con.commit()
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    con.close()
    return elapsed, cpu


def floor_pg(kind: str, path: Path, url: str) -> tuple[float, float, float]:
    """The floor on PostgreSQL: (wall seconds, its Python's CPU seconds, the server's CPU seconds)."""
    import psycopg

    with psycopg.connect(url.replace("+psycopg", "")) as con:
        con.execute(FLOOR_DDL.replace("INTEGER PRIMARY KEY", "SERIAL PRIMARY KEY"))
        con.execute(FLOOR_INDEX)
        con.commit()
        t, c, server = time.perf_counter(), time.process_time(), backend_cpu(con)
        with con.cursor() as cur, cur.copy("COPY inst (dataset_id, key, payload, label, explanation, split, meta) "
                                           "FROM STDIN") as cp:
            for row in floor_rows(kind, path):
                cp.write_row(row)
        con.commit()
        return time.perf_counter() - t, time.process_time() - c, backend_cpu(con) - server


class PgDatabase:
    """A fresh PostgreSQL database for one measurement."""

    def __init__(self) -> None:
        import psycopg

        self.admin = psycopg.connect(PG.replace("+psycopg", ""), autocommit=True)
        self.name = f"pxp_bench_{uuid.uuid4().hex[:8]}"
        self.admin.execute(f'CREATE DATABASE "{self.name}"')
        base = PG.replace("postgresql+psycopg://", "postgresql://")
        self.url = base.rsplit("/", 1)[0] + "/" + self.name

    def close(self) -> None:
        self.admin.execute(f'DROP DATABASE "{self.name}" WITH (FORCE)')
        self.admin.close()


#: what a transcripts import's sessions and messages name, copied before the replay (not timed), in the order of
#: their keys
NAMED = ("dataset", "instance", "experiment", "run", "annotator")
#: the first import's rows of each table the replay sends
FIRST = {"session": "run_id IN (SELECT id FROM run WHERE experiment_id = (SELECT min(id) FROM experiment))",
         "message": "session_id IN (SELECT s.id FROM session s JOIN run r ON r.id = s.run_id "
                    "WHERE r.experiment_id = (SELECT min(id) FROM experiment))"}


def proc_cpu(pid: int) -> float:
    """A process's CPU time so far (user + system, seconds), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backend_cpu(con: Any) -> float:
    """The CPU time of this connection's server process so far (seconds)."""
    return proc_cpu(con.execute("SELECT pg_backend_pid()").fetchone()[0])


def copied_out(con: Any, query: str) -> bytes:
    with con.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT") as cp:
        return b"".join(bytes(part) for part in cp)


def copy_in(con: Any, table: str, data: bytes) -> None:
    with con.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as cp:
        cp.write(data)


def replay_pg(src_url: str) -> list[tuple[float, float]]:
    """The first import's sessions and messages in `src_url`, read once, then sent again by one COPY each into a new
    database with pxp's schema, twice: as pxp's writes are checked, then with the replay's connection skipping the
    foreign keys' checks (`session_replication_role = replica`, a superuser's setting: for this measurement only,
    never in pxp), which PostgreSQL otherwise makes row by row. Each: (wall seconds, the server's CPU seconds)."""
    import psycopg

    with psycopg.connect(src_url) as src:
        named = [(table, copied_out(src, f"SELECT * FROM {table}")) for table in NAMED]
        rows = {table: copied_out(src, f"SELECT * FROM {table} WHERE {where} ORDER BY id")
                for table, where in FIRST.items()}
    out = []
    for checked in (True, False):
        target = PgDatabase()
        try:
            subprocess.run([sys.executable, "-c", "import sys; from pxp.storage.store import make_engine, upgrade; "
                            "upgrade(make_engine(sys.argv[1]))",
                            target.url.replace("postgresql://", "postgresql+psycopg://")], check=True, env=child_env())
            with psycopg.connect(target.url) as dst:
                for table, data in named:
                    copy_in(dst, table, data)
                dst.commit()
                if not checked:
                    dst.execute("SET session_replication_role = replica")
                t, c = time.perf_counter(), backend_cpu(dst)
                for table, data in rows.items():
                    copy_in(dst, table, data)
                dst.commit()
                out.append((time.perf_counter() - t, backend_cpu(dst) - c))
        finally:
            target.close()
    return out


def measure(kind: str, db: str, path: Path, n: int, folder: Path, reimport: bool, sessions: int = 0,
            replay: bool = False) -> str:
    replayed = " | —"
    if db == "sqlite":
        url = f"sqlite:///{folder}/pxp-{uuid.uuid4().hex[:6]}.db"
        times, rss, cpu = pxp_run(kind, url, path, 2 if reimport else 1)
        floor, floor_cpu = floor_sqlite(kind, path, folder)
    else:
        pdb = PgDatabase()
        try:
            times, rss, cpu = pxp_run(kind, pdb.url.replace("postgresql://", "postgresql+psycopg://"), path,
                                      2 if reimport else 1)
            floor, floor_cpu, floor_server = floor_pg(kind, path, pdb.url)
            if replay and kind in ("transcripts", "realistic"):
                (again_wall, again_cpu), (unchecked_wall, unchecked_cpu) = replay_pg(pdb.url)
                replayed = (f" | {again_wall:.2f} s ({again_wall / floor:.1f}×; server CPU {again_cpu:.2f} s, "
                            f"the floor's {floor_server:.2f} s; without the foreign keys' checks "
                            f"{unchecked_wall:.2f} s, server CPU {unchecked_cpu:.2f} s)")
        finally:
            pdb.close()
    wall = times[0]
    extra = (f" | {times[1]:.2f} s" if reimport else "") + (replayed if replay else "")
    what = f"realistic transcripts ({sessions:,} sessions)" if kind == "realistic" else kind
    return (f"| {what} | {db} | {n:,} | {wall:.2f} s | {floor:.2f} s | {wall / floor:.1f}× | "
            f"{n / wall:,.0f} | {rss:.0f} MiB | {cpu:.2f} s | {floor_cpu:.2f} s | {cpu / floor_cpu:.1f}×{extra} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k and 100k rows, SQLite only")
    ap.add_argument("--sizes", type=int, nargs="*", help="row counts (default 10k, 100k, 1M)")
    ap.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--kinds", nargs="*", default=["csv", "jsonl", "transcripts"],
                    help="csv, jsonl, transcripts, realistic (transcripts of 3-10 messages; --sizes counts sessions)")
    ap.add_argument("--reimport", action="store_true", help="also time importing the same file again")
    ap.add_argument("--replay", action="store_true",
                    help="transcripts on PostgreSQL: also time the rows pxp stored sent again by COPY (no Python), "
                         "with and without the foreign keys' checks")
    args = ap.parse_args()
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    dbs = ["sqlite"] if args.quick or args.db == "sqlite" else (
        ["postgresql"] if args.db == "postgresql" else ["sqlite", "postgresql"])
    if args.quick:
        print("(--quick: 10k and 100k rows, SQLite only)")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import pxp.cli.main"], check=True, env=child_env())
    print(f"CLI start-up (import pxp.cli.main), not counted below: {time.perf_counter() - t:.2f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| input | database | rows | pxp | floor | ratio | pxp rows/s | pxp peak RSS | pxp CPU | floor CPU | "
          "CPU ratio" + (" | re-import" if args.reimport else "") + (" | replay of pxp's rows" if args.replay else "")
          + " |")
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.reimport else "")
          + ("---|" if args.replay else ""))
    with tempfile.TemporaryDirectory(prefix="pxp-bench-import-") as tmp:
        folder = Path(tmp)
        for n in sizes:
            paths = write_inputs(folder, n) if set(args.kinds) - {"realistic"} else {}
            for kind in args.kinds:
                for db in dbs:
                    if kind == "realistic":
                        path, messages = write_realistic(folder, n)
                        print(measure(kind, db, path, messages, folder, args.reimport, n, args.replay), flush=True)
                    else:
                        print(measure(kind, db, paths[kind], n, folder, args.reimport, replay=args.replay), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
