"""The next case prepared in the background while the expert works on this one (README "The app").

A small pool of server threads runs pxp.running.pxp.live.prepare.prepare_next (never the page
script): when an annotator is served a case, the machine's INIT of their next case is produced, so
moving on shows it at once. One preparation at a time per annotator and experiment; a failure there
(an API error) is left for the page, which asks the machine itself, with its retry. It starts a moment
after the case is served (SETTLE_S), so it does not take the CPU from drawing that case (its film is
decoded and drawn in the browser meanwhile; docs/development.md, Benchmarks).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait

from sqlalchemy import Engine

from pxp.agents.base import Agent
from pxp.app import resources
from pxp.app.annotate.case_pane import warm_case
from pxp.running.pxp.live.prepare import prepare_depth, prepare_next
from pxp.running.pxp.live.turns import load_session

log = logging.getLogger(__name__)
#: seconds between serving a case and preparing the next: the page and the browser draw the case first
SETTLE_S = 0.8
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pxp-prepare")  # a waiting preparation holds one
_running: dict[tuple[str, int, int], Future[None]] = {}
_lock = threading.Lock()
#: set while the process stops serving: preparations still waiting to start are dropped
_stopping = threading.Event()


def prepare_next_case(experiment_id: int, annotator_id: int, settle: float = SETTLE_S) -> Future[None]:
    """Start preparing the annotator's next case in `settle` seconds, unless a preparation is already
    under way; that preparation (it never raises: a failure is logged and left for the page)."""
    url = resources.database_url()
    key = (url, experiment_id, annotator_id)
    if prepare_depth(resources.engine(), experiment_id) == 0:  # preparation off: no thread to wait and return
        done: Future[None] = Future()
        done.set_result(None)
        return done
    with _lock:
        running = _running.get(key)
        if running is not None and not running.done():
            return running
        engine, machine = resources.engine(), resources.machine(experiment_id)
        _running[key] = _pool.submit(_prepare, engine, machine, experiment_id, annotator_id, settle)
        return _running[key]


def _prepare(engine: Engine, machine: Agent, experiment_id: int, annotator_id: int, settle: float) -> None:
    def draw(sid: int) -> None:  # its image or molecule, made before the machine is asked
        try:
            warm_case(engine, load_session(engine, sid))
        except Exception as err:  # a bad image: the page shows it in words
            log.warning("drawing the next case ahead failed: %s", " ".join(str(err).split())[:300])

    if _stopping.wait(settle):  # the process stops serving: nothing is prepared
        return
    try:
        prepare_next(engine, experiment_id=experiment_id, annotator_id=annotator_id, machine=machine, claimed=draw)
    except Exception as err:  # the page asks the machine itself, with its retry, and shows a bad image
        log.warning("preparing the next case failed: %s", " ".join(str(err).split())[:300])


def stop_preparations(timeout: float = 60.0) -> None:
    """Drop the preparations still waiting to start and return once those under way have ended (or after
    `timeout` seconds): a process that stops serving, such as a test of the pages at its end, leaves none running
    behind it. Preparations asked for afterwards run as before."""
    _stopping.set()
    try:
        with _lock:
            running = list(_running.values())
        wait(running, timeout=timeout)
    finally:
        _stopping.clear()
