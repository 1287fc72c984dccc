"""How long the Annotate page waits on the database per human turn (simulated agent).

Prints p50/p95 of: claim_next, submit_human (message j), machine_step (message j+1),
and load_session, on SQLite (a temp file) and, with --postgres, on a throwaway database
created on the server of PXP_TEST_POSTGRES_URL and dropped afterwards; then the whole
Annotate script run (streamlit.testing AppTest, demo data) for a plain rerun and for a
turn (Send plus the machine's reply). Figures only.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import checkout  # noqa: F401  (this checkout on the import path)

from pxp.agents.base import Answer, Facts
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import load_session, machine_for, machine_step, submit_human
from pxp.storage.store import get_engine
from tests.factories import make_rad


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bench(url: str) -> None:
    engine = get_engine(url)
    make_rad(engine, name="bench-rad", per_label=20)
    eid = create_live_experiment(engine, dataset="bench-rad")
    me = ensure_annotator(engine, name="bench")
    machine = machine_for(engine, eid)
    t: dict[str, list[float]] = {"claim_next": [], "submit_human": [], "machine_step": [], "load_session": []}
    for _ in range(60):
        t0 = time.perf_counter()
        sid = claim_next(engine, experiment_id=eid, annotator_id=me)
        t["claim_next"].append(time.perf_counter() - t0)
        if sid is None:
            break
        machine_step(engine, sid, machine)
        while True:
            t0 = time.perf_counter()
            s = load_session(engine, sid)
            t["load_session"].append(time.perf_counter() - t0)
            if s.turn is None:
                break
            last = s.messages[-1]
            t0 = time.perf_counter()
            submit_human(engine, sid, j=s.j, answer=Answer(last.prediction, "My own reading."),
                         facts=Facts(True, False, False))
            t["submit_human"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            machine_step(engine, sid, machine)
            t["machine_step"].append(time.perf_counter() - t0)
    print(f"database: {engine.url.get_backend_name()}")
    for k, xs in t.items():
        print(f"{k:>13}: n={len(xs):4d}  p50={pct(xs, .5) * 1000:6.2f} ms  p95={pct(xs, .95) * 1000:6.2f} ms"
              f"  mean={statistics.fmean(xs) * 1000:6.2f} ms")


def bench_page() -> None:
    """The Annotate page's script run as a browser rerun would time it (no network)."""
    from streamlit.testing.v1 import AppTest

    from pxp.app import PAGE
    from pxp.app.router import VIEWS
    from pxp.running.pxp.controlled.demo import ensure_demo

    url = f"sqlite:///{tempfile.mkdtemp()}/page.db"
    os.environ["PXP_DATABASE_URL"] = url
    ensure_demo(get_engine(url))
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / "annotate.py")).run()
    at.sidebar.text_input(key="annotate_name").input("bench").run()
    for ds in ("demo-rad", "demo-drug"):
        at.sidebar.selectbox(key="annotate_dataset").set_value(ds).run()
        reruns, turns = [], []
        for _ in range(20):
            t0 = time.perf_counter()
            at.run()
            reruns.append(time.perf_counter() - t0)
        for _ in range(10):
            picks = [b for b in at.button if b.key and str(b.key).endswith("_pick_REFUTE")]
            sends = [b for b in at.button if b.key and str(b.key).endswith("_send")]
            if not picks or not sends:
                at.run()
                continue
            if ds == "demo-rad":
                [w for w in at.selectbox if str(w.key).endswith("_pred")][-1].set_value("Pneumonia")
            else:
                [w for w in at.text_input if str(w.key).endswith("_pred")][-1].input("CC(=O)Cl.Oc1ccccc1")
            picks[-1].click().run()
            t0 = time.perf_counter()
            [b for b in at.button if b.key and str(b.key).endswith("_send")][-1].click().run()
            turns.append(time.perf_counter() - t0)
        for what, xs in (("rerun", reruns), ("turn", turns)):
            if xs:
                print(f"annotate page {ds:>9} {what:>5}: n={len(xs):3d}  p50={pct(xs, .5) * 1000:6.1f} ms"
                      f"  p95={pct(xs, .95) * 1000:6.1f} ms")


def main() -> None:
    bench(f"sqlite:///{tempfile.mkdtemp()}/bench.db")
    bench_page()
    if "--postgres" in sys.argv:
        import uuid

        from sqlalchemy import create_engine, text

        admin = create_engine(os.environ.get(
            "PXP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
            isolation_level="AUTOCOMMIT")
        name = f"pxp_bench_{uuid.uuid4().hex[:10]}"
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            bench(admin.url.set(database=name).render_as_string(hide_password=False))
        finally:
            from pxp.storage.core import _engines

            for e in _engines.values():
                e.dispose()
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
