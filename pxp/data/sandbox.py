"""Potentially slow chemistry outside the server's interpreter: a small pool of worker processes,
each call with a timeout (docs/operations.md "Importing data" (limits)).

RDKit's depiction (2D coordinates) can take minutes, or crash, on a molecule that passed the size
limits of pxp.data.chem; run in the server, that freezes every user's page. Here such a call costs
its caller one line after `TIMEOUT_S` seconds: the worker is killed and a fresh one takes its place.
A worker that dies (a crash in native code) is replaced the same way.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar, cast

from pxp.protocols.errors import PxpError

T = TypeVar("T")

TIMEOUT_S = 10.0
"""Longest one drawing may take (seconds) before it is abandoned."""
WORKERS = 2
"""Worker processes (the machine's cores are shared with the server and the database)."""
STARTUP_S = 120.0
"""Longest a fresh worker may take to start (an interpreter importing RDKit; slow on a loaded machine).
It is not counted in a call's `TIMEOUT_S`."""


class ChemFailed(PxpError, RuntimeError):
    """A sandboxed call timed out or its worker died: one line, the server is unharmed."""


def serve(read_fd: int, write_fd: int) -> None:
    """The worker's loop: call (fn, args) pairs until the server's end of the pipe closes."""
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    import pxp.data.render  # noqa: F401  (RDKit and the drawings: loaded before the first call's clock starts)

    outbox.send((True, "ready"))
    while True:
        try:
            fn, args = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            outbox.send((True, fn(*args)))
        except Exception as err:  # the caller gets the error (e.g. InvalidSmiles) as raised
            outbox.send((False, err))


class _Worker:
    """One worker: a fresh interpreter (no fork of the threaded server) importing this same pxp."""

    def __init__(self) -> None:
        to_child, from_server = os.pipe()
        from_child, to_server = os.pipe()
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from pxp.data.sandbox import serve; serve({to_child}, {to_server})"],
            pass_fds=(to_child, to_server), stdin=subprocess.DEVNULL, env=env, cwd=root)
        os.close(to_child)
        os.close(to_server)
        self.outbox = Connection(from_server, readable=False)
        self.conn = Connection(from_child, writable=False)
        self.ready = False

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> tuple[bool, Any]:
        if not self.ready:  # a fresh worker: its start is not part of the call's time
            try:
                started = self.conn.poll(STARTUP_S) and self.conn.recv() == (True, "ready")
            except (EOFError, OSError):
                started = False
            if not started:
                self.kill()
                raise ChemFailed(f"failed: the drawing worker did not start within {STARTUP_S:g} s; try again")
            self.ready = True
        try:
            self.outbox.send((fn, args))
        except OSError:  # the worker died while idle
            self.kill()
            raise ChemFailed("failed: the worker process had stopped; try again") from None
        if not self.conn.poll(timeout):
            self.kill()
            raise ChemFailed(f"took longer than the {timeout:g} s limit and was stopped")
        try:
            ok, value = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise ChemFailed("failed: the worker process stopped (the input is not drawable)") from None
        return bool(ok), value

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.conn.closed

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(5)
        self.conn.close()
        self.outbox.close()


_idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
_lock = threading.Lock()
_started = 0


def _acquire(timeout: float) -> _Worker:
    global _started
    try:
        return _idle.get_nowait()
    except queue.Empty:
        pass
    with _lock:
        if _started < WORKERS:
            _started += 1
            try:
                return _Worker()
            except BaseException:
                _started -= 1
                raise
    try:
        return _idle.get(timeout=timeout)
    except queue.Empty:
        raise ChemFailed(f"the drawing workers stayed busy for {timeout:g} s; try again") from None


def _release(worker: _Worker) -> None:
    global _started
    if worker.alive():
        _idle.put(worker)
    else:
        with _lock:
            _started -= 1


def run_sandboxed(fn: Callable[..., T], *args: Any, timeout: float = TIMEOUT_S) -> T:
    """fn(*args) in a worker process; its exception re-raised, ChemFailed on timeout or crash.

    `fn` must be a module-level function and its arguments and result picklable.
    """
    worker = _acquire(timeout)
    try:
        ok, value = worker.call(fn, args, timeout)
    finally:
        _release(worker)
    if not ok:
        raise value
    return cast(T, value)


__all__ = ["TIMEOUT_S", "WORKERS", "ChemFailed", "run_sandboxed"]
