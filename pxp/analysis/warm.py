"""Results computed in the background, so a page's first visitor finds them cached (docs/development.md, Reading a
study): one thread per database engine runs the steps it is given (each one view's computation through
pxp.analysis.queries.cached) when it starts, and again once the data version has changed and then stayed the
same for a few seconds (not all the time during a run that stores a message every second), at most once per
`every` seconds.

The steps only read (one short read transaction per query, like the pages'). A step that fails is one log line;
the others still run and the round is tried again `every` seconds later. The thread is a daemon (it ends with the
server) and ends too when its engine is gone or on `stop()`.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from pxp.analysis.queries import data_version
from pxp.errors import user_message

log = logging.getLogger("pxp.analysis.warm")

#: one named computation: (what it is, for the log line; the call)
Step = tuple[str, Callable[[], object]]


@dataclass(frozen=True)
class Pace:
    """How often the warmer looks and works (seconds)."""

    poll: float = 3.0  # between two reads of the data version (about 0.03 s of CPU at 200,000 sessions)
    settle: float = 6.0  # the version unchanged this long before warming again
    every: float = 30.0  # between the starts of two rounds (and after a failed one)


class Warmer:
    """The background thread of one engine; `rounds` and `version` say what it has done."""

    def __init__(self, engine: Engine, steps: Callable[[Engine], Iterable[Step]], pace: Pace) -> None:
        self._engine = weakref.ref(engine)
        self._steps = steps
        self.pace = pace
        self._stop = threading.Event()
        self._away = False  # the data version could not be read last time
        self.rounds = 0  # rounds finished
        self.failures = 0  # steps that failed
        self.version: tuple[Any, ...] | None = None  # the data version of the last round without a failure
        self.finished = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="pxp-warm", daemon=True)

    def stop(self) -> None:
        self._stop.set()

    def wait_rounds(self, rounds: int, timeout: float) -> bool:
        """Whether `rounds` rounds have finished within `timeout` seconds."""
        with self.finished:
            return self.finished.wait_for(lambda: self.rounds >= rounds, timeout)

    def _version(self) -> tuple[Any, ...] | None:
        engine = self._engine()
        if engine is None:
            return None
        try:
            version = data_version(engine)
        except Exception as err:  # the database is away for a while: one line, then look again later
            if not self._away:
                log.warning("warming: the data version cannot be read: %s", user_message(err))
            self._away = True
            return ()
        self._away = False
        return version

    def _run(self) -> None:
        seen, since, last = self._version(), time.monotonic(), float("-inf")
        while seen is not None and not self._stop.is_set():
            now = time.monotonic()
            quiet = now - since >= self.pace.settle or self.rounds == 0  # the first round at once
            if seen != () and seen != self.version and quiet and now - last >= self.pace.every:
                last = now
                self._round(seen)
            if self._stop.wait(self.pace.poll):
                return
            current = self._version()
            if current != seen:
                seen, since = current, time.monotonic()

    def _round(self, version: tuple[Any, ...]) -> None:
        engine = self._engine()
        if engine is None:
            return
        t0, failed, done = time.perf_counter(), 0, 0
        try:
            steps = list(self._steps(engine))
        except Exception as err:
            log.warning("warming: what to compute cannot be read: %s", user_message(err))
            steps, failed = [], 1
        del engine  # the steps hold it during the round only: the thread never keeps a dropped engine alive
        for name, step in steps:
            if self._stop.is_set():
                return
            try:
                step()
                done += 1
            except Exception as err:
                failed += 1
                log.warning("warming: %s failed: %s", name, user_message(err))
        self.failures += failed
        with self.finished:
            self.rounds += 1
            if not failed:
                self.version = version
            self.finished.notify_all()
        log.info("warming: %d results computed in %.1f s (%d failed)", done, time.perf_counter() - t0, failed)


_warmers: weakref.WeakKeyDictionary[Engine, Warmer] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def start_warming(engine: Engine, steps: Callable[[Engine], Iterable[Step]], pace: Pace = Pace()) -> Warmer:
    """The engine's warmer, started on the first call (later calls return the same one)."""
    with _lock:
        warmer = _warmers.get(engine)
        if warmer is None or not warmer.thread.is_alive():
            warmer = _warmers[engine] = Warmer(engine, steps, pace)
            warmer.thread.start()
        return warmer


def warmer_of(engine: Engine) -> Warmer | None:
    """The engine's warmer, if one was started."""
    with _lock:
        return _warmers.get(engine)
