"""The Experiments page shows the `pxp worker`s alive, the queue and each repetition's worker (docs/operations.md,
Workers).

Real PostgreSQL, real procrastinate, a real `pxp worker` subprocess; on SQLite one quiet line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.workers.queue import abort, enqueue, jobs
from pxp.storage.store import get_engine
from tests.app.test_app import app_db, new_app, ok, texts  # noqa: F401  (app_db is a fixture)
from tests.factories import make_drug, make_rad
from tests.running.test_queue import _cfg, _stop, _wait_until, _worker

QUIET = "No distributed workers (PostgreSQL only)"


def _quiet(at: Any) -> bool:
    """The page says the one quiet line and shows no workers section."""
    return QUIET in texts(at) and "No worker alive" not in texts(at) and not _section(at)


def _section(at: Any) -> bool:
    return "Distributed workers" in [h.value for h in at.subheader]


@pytest.fixture
def app_pg(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Engine]]:
    monkeypatch.setenv("PXP_DATABASE_URL", pg_url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(pg_url)
    make_rad(engine, per_label=4)
    yield pg_url, engine
    engine.dispose()


def test_sqlite_shows_one_quiet_line(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    assert _quiet(at), texts(at)
    assert not at.dataframe  # no workers or queue table
    assert QUIET in [c.value for c in at.caption]


@pytest.mark.long
@pytest.mark.postgres
def test_queued_experiment_then_a_worker_alive_running_a_repetition(app_pg: tuple[str, Engine]) -> None:
    url, engine = app_pg
    at = new_app("experiments")
    assert _quiet(at), texts(at)  # PostgreSQL, but procrastinate's tables are not there: no trace, one line
    eid = create_experiment(engine, _cfg(2, latency=0.3), name="QV").id or 0
    enqueue(engine, eid)  # what `pxp run --distributed` does first (it installs the queue's tables)
    ok(at.run())
    t = texts(at)
    assert _section(at) and "No worker alive" in t and QUIET not in t, t
    [queue] = [d.value for d in at.dataframe]
    assert queue.to_dict("records") == [{"experiment": "QV", "todo": 2, "doing": 0, "failed": 0, "succeeded": 0}]
    assert "Repetitions: 1: queued · 2: queued" in t

    worker = _worker(url, "w1")  # concurrency 1: one repetition runs, the other waits
    try:
        _wait_until(lambda: sorted(st for _, st in jobs(engine, eid).values()) == ["doing", "todo"])
        ok(at.run())
        t = texts(at)
        assert "No worker alive" not in t, t
        ws, queue = (d.value for d in at.dataframe)
        with engine.connect() as conn:
            wid = int(conn.execute(text("select id from procrastinate_workers")).scalar_one())
        assert ws["worker"].tolist() == [wid] and ws["jobs"].tolist() == [1]
        assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", ws["last heartbeat"].iloc[0])
        assert queue.to_dict("records") == [{"experiment": "QV", "todo": 1, "doing": 1, "failed": 0, "succeeded": 0}]
        running = {rep for rep, (_, st) in jobs(engine, eid).items() if st == "doing"}
        [rep] = running
        other = 3 - rep
        line = next(c.value for c in at.caption if str(c.value).startswith("Repetitions:"))
        assert f"{rep}: worker {wid}" in line and f"{other}: queued" in line, line
    finally:
        _stop([worker])
    ok(at.run())  # the stopped worker paused its repetition: it goes back to the queue
    t = texts(at)
    assert "No worker alive" in t and "Traceback" not in t, t

    abort(engine, eid)  # QV's jobs leave the queue (its repetitions pause)
    done = create_experiment(engine, _cfg(1), name="QD").id or 0
    enqueue(engine, done)
    worker = _worker(url, "w2")
    try:
        _wait_until(lambda: [st for _, st in jobs(engine, done).values()] == ["succeeded"])
    finally:
        _stop([worker])
    ok(at.run())
    captions = [str(c.value) for c in at.caption]
    assert "Repetitions: 1: done" in captions, captions
    assert any(c.startswith("Repetitions: 1: paused") for c in captions), captions
    queue = at.dataframe[0].value
    assert queue.to_dict("records")[-1] == {"experiment": "QD", "todo": 0, "doing": 0, "failed": 0, "succeeded": 1}
    with engine.connect() as conn:  # the repetition cancelled while queued reads paused too, not "created"
        runs = {s for (s,) in conn.execute(text("select status from run where experiment_id = :e"), {"e": eid})}
    assert runs == {"paused"}

    # resumed in-process since: each repetition shows what it is now, not its last job's end
    assert run_experiment(engine, eid).status == "finished"
    ok(at.run())
    captions = [str(c.value) for c in at.caption]
    assert "Repetitions: 1: done · 2: done" in captions, captions
