"""What the Analytics page shows is cached by data version (pxp.analysis.queries.cached, docs/research.md,
Analytics) and computed again once a session is stored, so the page never shows stale numbers: the paired
comparison (Compare), the aborted sessions by reason (under Table 1) and the counts per repetition."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlmodel import select

from pxp.analysis.queries import Selection
from pxp.analysis.report import aborted_by_reason
from pxp.analysis.statistics import compare_experiments
from pxp.analysis.tables import repetition_frame
from pxp.storage.store import db_session
from pxp.storage.tables import Experiment, Instance, Message, Run, Session
from tests.analysis.test_statistics import BOTH, HUMAN_ONLY, NEITHER, _import


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements the engine runs inside the block."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def store_session(engine: Engine, experiment: str, key: str, tags: list[tuple[str, str]], *,
                  abort_reason: str | None = None) -> None:
    """A session of the experiment's first run on a new instance `key`, finished (aborted with a reason)."""
    with db_session(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == experiment)).one()
        run = db.exec(select(Run).where(Run.experiment_id == exp.id)).first()
        held = db.exec(select(Session).where(Session.run_id == run.id)).all()  # type: ignore[union-attr]
        dataset = db.get(Instance, held[0].instance_id).dataset_id  # type: ignore[union-attr]
        ordinal = max(s.ordinal for s in held) + 1
        inst = Instance(dataset_id=dataset, key=key, ordinal=ordinal)
        db.add(inst)
        db.flush()
        s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=ordinal, n=4, k=3,  # type: ignore[union-attr]
                    status="aborted" if abort_reason else "finished", abort_reason=abort_reason,
                    stop_reason=None if abort_reason else "ratified", updated_at=datetime.now(UTC))
        db.add(s)
        db.flush()
        for j, (sender, tag) in enumerate(tags, start=1):
            db.add(Message(session_id=s.id or 0, j=j, sender=sender, receiver="x", tag=tag))


def test_the_comparison_is_cached_until_a_session_is_stored(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, "A", {"i1": BOTH, "i2": BOTH, "i3": NEITHER})
    _import(engine, tmp_path, "B", {"i1": BOTH, "i2": HUMAN_ONLY})
    first = compare_experiments(engine, "A", "B", resamples=200)
    assert (first["pairs"], first["unpaired"]) == (2, {"A": 1, "B": 0})
    with statements(engine) as seen:
        again = compare_experiments(engine, "A", "B", resamples=200)
    assert again == first and len(seen) == 1, seen  # only the data-version query
    again["metrics"].clear()  # a caller's copy: changing it changes nothing cached
    assert compare_experiments(engine, "A", "B", resamples=200) == first
    store_session(engine, "B", "i3", NEITHER)  # i3 now has a partner in B
    fresh = compare_experiments(engine, "A", "B", resamples=200)
    assert (fresh["pairs"], fresh["unpaired"]) == (3, {"A": 0, "B": 0})


def test_aborted_by_reason_is_cached_until_a_session_is_stored(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, "A", {"i1": BOTH})
    assert aborted_by_reason(engine) == {}
    store_session(engine, "A", "x1", [("machine", "INIT")], abort_reason="the reply had no Prediction field")
    first = aborted_by_reason(engine)
    assert sum(first.values()) == 1
    with statements(engine) as seen:
        assert aborted_by_reason(engine) == first
    assert len(seen) == 1 and "abort_reason" not in seen[0], seen  # the data-version query only
    store_session(engine, "A", "x2", [("machine", "INIT")], abort_reason="the service did not answer")
    assert sum(aborted_by_reason(engine).values()) == 2


def test_counts_per_repetition_are_cached_until_a_session_is_stored(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, "A", {"i1": BOTH, "i2": NEITHER})
    sel = Selection()
    first = repetition_frame(engine, sel)
    assert first.total_sessions.tolist() == [2] and first.two_way.tolist() == [1]
    first.loc[0, "two_way"] = 99  # a caller's copy
    with statements(engine) as seen:
        assert repetition_frame(engine, sel).two_way.tolist() == [1]
    assert len(seen) == 1, seen
    store_session(engine, "A", "i3", BOTH)
    fresh = repetition_frame(engine, sel)
    assert fresh.total_sessions.tolist() == [3] and fresh.two_way.tolist() == [2]


def test_a_second_caller_waits_for_the_first_ones_result(engine: Engine) -> None:
    """Two visitors (or a visitor and the background warming) opening the same view: one computes it."""
    import threading

    from pxp.analysis.queries import cached

    calls: list[str] = []
    started, go = threading.Event(), threading.Event()

    def compute() -> list[str]:
        calls.append(threading.current_thread().name)
        started.set()
        go.wait(10)
        return ["the result"]

    got: dict[str, list[str]] = {}

    def visit(who: str) -> None:
        got[who] = cached(engine, "test_wait", ("same",), compute)

    first = threading.Thread(target=visit, args=("first",), name="first")
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=visit, args=("second",), name="second")
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waiting for the first one's result
    go.set()
    first.join(10)
    second.join(10)
    assert calls == ["first"] and got["first"] is got["second"]
