"""The background warming of the Analytics views (pxp.analysis.warm; docs/development.md, Reading a study): it
fills exactly the cache entries the views read when a first visitor opens them, warms again once the data has
changed and then stayed the same (not while a run keeps storing), only reads, survives a failing query, and
ends with its engine."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from streamlit.testing.v1 import AppTest

from pxp.analysis import queries
from pxp.analysis.queries import data_version, options
from pxp.analysis.warm import Pace, Warmer, start_warming, warmer_of
from pxp.app.analytics_data import FIRST, first_request, table1_view, warm_steps
from pxp.app.views.analytics_common import VIEWS
from pxp.storage.store import get_engine, make_engine
from tests.analysis.test_cache import store_session
from tests.app.test_analytics_page import PAGE, controlled, ok
from tests.factories import make_rad

FAST = Pace(poll=0.05, settle=1.5, every=0.2)


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """Two controlled experiments on the same instances (so Compare pairs them), warming on."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    monkeypatch.setenv("PXP_WARM", "1")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(url)
    make_rad(engine)
    controlled(engine, "RAD-a", reps=2, seed=1)
    controlled(engine, "RAD-b", reps=2, seed=2)
    queries.clear_cache()
    yield engine
    warmer = warmer_of(engine)
    if warmer is not None:
        warmer.stop()
        warmer.thread.join(10)


def entries() -> dict[Hashable, tuple[Any, int]]:
    """The analytics cache: each entry's data version and the identity of its value (a new value: computed)."""
    with queries._lock:
        return {k: (version, id(value)) for k, (version, value) in queries._CACHE.items()}


def test_the_warming_fills_what_each_view_reads_on_a_first_visit(study: Engine) -> None:
    ok(AppTest.from_file(PAGE, default_timeout=60).run())  # the app's first page opens the database: warming starts
    warmer = warmer_of(study)
    assert warmer is not None and warmer.wait_rounds(1, timeout=60) and warmer.failures == 0
    warmed = entries()
    assert len(warmed) >= 15  # Table 1's, the labels', the annotators', the flags', Compare's, ...
    for view in VIEWS:
        at = AppTest.from_file(PAGE, default_timeout=60)
        at.query_params["view"] = view
        ok(at.run())
        assert at.radio(key="analytics_view").value == view
        assert entries() == warmed, f"{view} computed what the warming had not"
    assert warmer.rounds == 1  # nothing changed: nothing warmed again


def test_it_warms_again_once_the_data_stays_the_same(study: Engine) -> None:
    warmer = start_warming(study, warm_steps, FAST)
    assert warmer.wait_rounds(1, timeout=60)
    req = first_request(options(study))
    end = time.monotonic() + 3 * FAST.settle
    i = 0
    while time.monotonic() < end:  # a run storing a session every 0.1 s: the version never settles
        i += 1
        store_session(study, "RAD-a", f"new-{i}", [("machine", "INIT"), ("human", "RATIFY")])
        time.sleep(0.1)
    assert warmer.rounds == 1
    assert warmer.wait_rounds(2, timeout=60)  # quiet for FAST.settle: warmed at the new version
    assert warmer.version == data_version(study)
    before = entries()
    table1_view(study, req)
    assert entries() == before


def test_the_warming_only_reads_and_fills_what_the_views_read(any_engine: Engine) -> None:
    """On SQLite and PostgreSQL: only SELECTs in the warming thread, and each view's data then computes nothing."""
    make_rad(any_engine)
    controlled(any_engine, "RAD-a", reps=2, seed=1)
    controlled(any_engine, "RAD-b", reps=2, seed=2)
    queries.clear_cache()
    seen: list[str] = []

    def record(*args: Any) -> None:
        if threading.current_thread().name == "pxp-warm":
            seen.append(str(args[2]).lstrip().split(None, 1)[0].upper())

    event.listen(any_engine, "before_cursor_execute", record)
    warmer = start_warming(any_engine, warm_steps, FAST)
    try:
        assert warmer.wait_rounds(1, timeout=60) and warmer.failures == 0
    finally:
        event.remove(any_engine, "before_cursor_execute", record)
        warmer.stop()
    assert seen and set(seen) <= {"SELECT", "WITH"}
    warmed = entries()
    req = first_request(options(any_engine))
    for view, data in FIRST.items():
        data(any_engine, req)
        assert entries() == warmed, view


def test_a_failing_step_is_one_log_line_and_tried_again(study: Engine, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> object:
        with study.connect() as c:
            return c.execute(text("SELECT * FROM no_such_table")).all()

    def steps(engine: Engine) -> list[tuple[str, Any]]:
        return [("the broken view", broken), *warm_steps(engine)]

    caplog.set_level(logging.WARNING, logger="pxp.analysis.warm")
    warmer = start_warming(study, steps, FAST)
    assert warmer.wait_rounds(2, timeout=60)  # the round after a failure comes `every` seconds later
    assert warmer.thread.is_alive() and warmer.failures >= 2 and warmer.version is None
    lines = [r.getMessage() for r in caplog.records if r.name == "pxp.analysis.warm"]
    assert lines and all("\n" not in line and line.startswith("warming: the broken view failed: ") for line in lines)
    assert all("OperationalError" in line and "Traceback" not in line for line in lines)  # the page's one line
    assert len(entries()) >= 15  # the other steps still ran


def test_it_ends_with_its_engine_and_on_stop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'own.db'}"
    engine = make_engine(url)
    from pxp.storage.store import upgrade

    upgrade(engine)
    warmer: Warmer | None = start_warming(engine, warm_steps, FAST)
    assert warmer is not None and warmer.wait_rounds(1, timeout=60)
    assert start_warming(engine, warm_steps, FAST) is warmer  # one per engine
    thread = warmer.thread
    engine.dispose()
    del engine, warmer
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()

    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    w = start_warming(other, warm_steps, FAST)
    w.stop()
    w.thread.join(10)
    assert not w.thread.is_alive()


def test_a_database_away_is_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A database without pxp's tables (as good as away): the warmer says so once, keeps looking, computes nothing."""
    caplog.set_level(logging.WARNING, logger="pxp.analysis.warm")
    bare = make_engine(f"sqlite:///{tmp_path / 'bare.db'}")
    warmer = start_warming(bare, warm_steps, FAST)
    time.sleep(20 * FAST.poll)
    assert warmer.thread.is_alive() and warmer.rounds == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "pxp.analysis.warm"]
    assert len(lines) == 1 and lines[0].startswith("warming: the data version cannot be read: "), lines
    warmer.stop()
    warmer.thread.join(10)
