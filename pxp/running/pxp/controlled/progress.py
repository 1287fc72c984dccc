"""Progress of a controlled run, and the closing cost/latency summary.

On a terminal: a rich display with one line per repetition (sessions done/total, the
current session and message, calls, tokens, cost). Elsewhere (a pipe, a log file, CI):
plain lines, one per finished session and per repetition start/end.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from sqlalchemy import Engine

from pxp.running.pxp.controlled.runner import Usage, run_counts, run_usage


def _usage_text(u: Usage) -> str:
    tokens = f" · {u.tokens_in}/{u.tokens_out} tokens" if u.tokens_in or u.tokens_out else ""
    cost = f" · ${u.cost:.4f}" if u.cost else ""
    return f"{u.calls} calls{tokens}{cost}"


class _Base:
    """Shared bookkeeping: repetition → run id, and throttled usage polling."""

    def __init__(self, engine: Engine, experiment_id: int, interval: float = 0.5) -> None:
        self.engine = engine
        self.experiment_id = experiment_id
        self.interval = interval
        self.lock = threading.Lock()
        self.run_ids: dict[int, int] = {}
        self.totals: dict[int, int] = {}
        self.done: dict[int, int] = {}
        self._usage: dict[int, Usage] = {}
        self._polled = 0.0

    def usage(self, rep: int, *, force: bool = False) -> Usage:
        now = time.monotonic()
        if force or now - self._polled >= self.interval:
            self._polled = now
            with contextlib.suppress(Exception):  # a busy database must not stop the run over a progress line
                self._usage = run_usage(self.engine, self.experiment_id)
        return self._usage.get(self.run_ids.get(rep, -1), Usage())

    def __enter__(self) -> _Base:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class PlainProgress(_Base):
    """One plain line per event worth a line (not on a terminal); `prefix` names the experiment in a study."""

    def __init__(self, engine: Engine, experiment_id: int, stream: IO[str], prefix: str = "") -> None:
        super().__init__(engine, experiment_id, interval=0.0)
        self.stream, self.prefix = stream, prefix
        self.restarted: set[int] = set()  # repetitions started again after a fault, not yet going again

    def _line(self, text: str) -> None:
        with self.lock:
            self.stream.write(self.prefix + text + "\n")
            self.stream.flush()

    def note(self, line: str) -> None:
        """A line of its own (a warning) between the progress lines."""
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
        with self.lock:
            again = rep in self.run_ids
            self.run_ids[rep], self.totals[rep], self.done[rep] = run_id, total, done
            if again:  # a try after a fault: its wait was said once (the runner's note), not once a try
                self.restarted.add(rep)
                return
        self._line(f"rep {rep}: {done}/{total} sessions done, running")

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        pass

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        with self.lock:
            self.done[rep] = self.done.get(rep, 0) + 1
            done, total = self.done[rep], self.totals.get(rep, 0)
            u = self.usage(rep, force=True)
            back = rep in self.restarted
            self.restarted.discard(rep)
        if back:
            self._line(f"rep {rep}: the database is back, running again")
        ctx = "context kept" if kept else "context dropped"
        self._line(f"rep {rep}: session {ordinal} {status}, {ctx} ({done}/{total}) · {_usage_text(u)}")

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        with self.lock:
            u = self.usage(rep, force=True)
        why = f": {note}" if note else ""
        self._line(f"rep {rep}: {status}{why} · {_usage_text(u)}")


def _display(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.fields[row]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[current]}"),
        TextColumn("[dim]{task.fields[usage]}"),
        TimeElapsedColumn(),
        console=console,
    )


class RichProgress(_Base):
    """A live display, one row per repetition; a study's experiments share one display (`shared`,
    rows named by `prefix`), which its owner (StudyProgress) starts and stops."""

    def __init__(self, engine: Engine, experiment_id: int, console: Console, *, shared: Progress | None = None,
                 prefix: str = "") -> None:
        super().__init__(engine, experiment_id)
        self.progress = shared or _display(console)
        self.owned, self.prefix = shared is None, prefix
        self.tasks: dict[int, TaskID] = {}

    def add_rows(self) -> None:
        """The repetitions' rows in order, whichever thread starts first."""
        with contextlib.suppress(Exception):  # a busy database: rows appear as repetitions start
            for rep, (run_id, total, done) in sorted(run_counts(self.engine, self.experiment_id).items()):
                self.run_started(rep, run_id, total, done, current="finished" if done == total else "waiting")

    def __enter__(self) -> RichProgress:
        self.add_rows()
        if self.owned:
            self.progress.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.owned:
            self.progress.stop()

    def note(self, line: str) -> None:
        """A line above the live display (printed to stderr directly it would be garbled by the bars)."""
        self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def run_started(self, rep: int, run_id: int, total: int, done: int, current: str = "running") -> None:
        with self.lock:
            self.run_ids[rep] = run_id
            if rep in self.tasks:
                self.progress.update(self.tasks[rep], total=total, completed=done, current=current)
            else:
                self.tasks[rep] = self.progress.add_task(
                    f"rep {rep}", total=total, completed=done, row=escape(f"{self.prefix}rep {rep}"), current=current,
                    usage="",
                )

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        with self.lock:
            u = self.usage(rep)
            self.progress.update(self.tasks[rep], current=f"session {ordinal} · message {j} {tag}",
                                 usage=_usage_text(u))

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        with self.lock:
            self.progress.advance(self.tasks[rep])

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        with self.lock:
            u = self.usage(rep, force=True)
            self.progress.update(self.tasks[rep], current=escape(status + (f": {note}" if note else "")),
                                 usage=_usage_text(u))


def make_progress(engine: Engine, experiment_id: int, console: Console) -> PlainProgress | RichProgress:
    """The rich display on a terminal, plain lines otherwise."""
    if console.is_terminal:
        return RichProgress(engine, experiment_id, console)
    return PlainProgress(engine, experiment_id, console.file)


class StudyProgress:
    """One display for a study's experiments run at once (`pxp run --grid --distributed`): a row per
    repetition named `experiment rep r` on a terminal, plain lines prefixed with the experiment elsewhere."""

    def __init__(self, engine: Engine, experiments: list[tuple[int, str]], console: Console) -> None:
        self.shared = _display(console) if console.is_terminal else None
        self.observers: dict[int, PlainProgress | RichProgress] = {
            eid: RichProgress(engine, eid, console, shared=self.shared, prefix=f"{name} ")
            if self.shared is not None else PlainProgress(engine, eid, console.file, prefix=f"{name}: ")
            for eid, name in experiments
        }
        self._stream = console.file

    def __enter__(self) -> StudyProgress:
        for obs in self.observers.values():
            obs.__enter__()
        if self.shared is not None:
            self.shared.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.shared is not None:
            self.shared.stop()

    def note(self, line: str) -> None:
        if self.shared is not None:
            self.shared.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self._stream.write(line + "\n")
            self._stream.flush()


def render_usage(rows: list[dict[str, Any]], seconds: float | None = None) -> list[str]:
    """The cost/latency summary: one line per (purpose, provider, model), then totals."""
    lines = ["", "Calls (cost and latency)"]
    if not rows:
        lines.append("no calls recorded")
    head = ("purpose", "provider:model", "calls", "errors", "tokens in/out", "cost USD", "latency mean/p95 ms")
    body = [
        (
            r["purpose"],
            f"{r['provider']}:{r['model']}" if r["provider"] != r["model"] else r["provider"],
            str(r["calls"]),
            str(r["errors"]),
            "—" if r.get("no_usage") == r["calls"] else f"{r['tokens_in']}/{r['tokens_out']}",
            "-" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
            f"{r['latency_mean_ms']:.0f}/{r['latency_p95_ms']:.0f}",
        )
        for r in rows
    ]
    if body:
        widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
        costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
        total = f"${sum(costs):.4f}" if costs else "no priced calls"
        lines.append(f"total: {sum(r['calls'] for r in rows)} calls, {total}")
        if no_usage := sum(r.get("no_usage", 0) for r in rows):
            lines.append(f"{no_usage} call(s) had no usage (the server sent no token counts): tokens and cost unknown")
    if seconds is not None:
        lines.append(f"wall time: {seconds:.1f} s")
    return lines
