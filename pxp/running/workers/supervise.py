"""A server and every process below it, stopped together (docs/operations.md, Install): `pxp app` stays the parent
of the Streamlit server it starts, is the subreaper of what that server starts (run workers in sessions of their
own, drawing workers), and on SIGTERM, SIGINT or SIGHUP, or its own parent going away, ends all of them within a
few seconds. Linux reads the process tree from /proc; elsewhere only the server itself is stopped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

#: how long the server has to stop after SIGTERM, then its processes after theirs, before SIGKILL
STOP_GRACE_S = 5.0
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option: int, value: int) -> None:
    """Linux prctl(2); nothing elsewhere."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def descendants(root: int) -> list[int]:
    """Every process below `root` (children first), read from /proc; [] where there is no /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.parent.name))
    out: list[int] = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _signal_all(pids: list[int], sig: int) -> None:
    import signal as _signal

    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, _signal.Signals(sig))


def _reap(deadline: float) -> None:
    """Collect the exit of every child of this process (orphans below it come to it as their subreaper)."""
    import time

    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not descendants(os.getpid()):
                return
            time.sleep(0.05)


def supervise(cmd: list[str], env: dict[str, str]) -> int:
    """Run the server as a child and end it, with every process below it, when this process is told to stop
    (SIGTERM, SIGINT, SIGHUP) or its own parent goes away; the server's exit code, or 0 after a stop."""
    import signal
    import time

    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans below the server become ours, so none escapes the stop
    parent = os.getppid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # our parent going away is a stop too
    stop: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    proc = subprocess.Popen(cmd, env=env, preexec_fn=lambda: _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM))
    code: int | None = None
    while code is None and not stop:
        if os.getppid() != parent:  # the parent went before PDEATHSIG was set
            stop.append(signal.SIGHUP)
            break
        try:
            code = proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
    if code is None:
        proc.terminate()
        try:
            code = proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    _signal_all(descendants(os.getpid()), signal.SIGTERM)  # what the server left: orphans are ours now
    _reap(time.monotonic() + STOP_GRACE_S)
    _signal_all(descendants(os.getpid()), signal.SIGKILL)
    _reap(time.monotonic() + STOP_GRACE_S)
    return 0 if stop else code
