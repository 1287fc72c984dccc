"""One repetition of a controlled experiment: INTERACT(X, n, k) over its sessions, in order, with LEARN.

Sessions inside a repetition are sequential (the machine carries the context of earlier
kept sessions); each runs through the engine's one session loop
(pxp.running.pxp.engine.interact_session), then LEARN decides (pxp.running.pxp.controlled.learn). A transient
failure (AgentUnavailable) or Ctrl-C pauses the repetition; resuming retries the step that
failed, and nothing stored is ever repeated.
docs/research.md, Evaluation schedules: the test split is evaluated after every `eval_every`-th session and after the
last (when the carried context changed since the last evaluation), the prompt carries what
the carry policy selects, and a prompt estimated beyond the model's context window is
warned of once per run (logged and stored as the run's note).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from sqlalchemy import Engine, update
from sqlmodel import col, select

from pxp.agents.base import Agent, AgentUnavailable, CarriedSession
from pxp.llm.limits import call_limit
from pxp.llm.models import context_window, estimate_tokens
from pxp.llm.redact import redact_any
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.config import RunConfig, parse_carry
from pxp.running.pxp.controlled.attempts import (
    FORMAT_NOTE,
    FormatFault,
    format_fault,
    format_kind,
    pause_note,
    retry_format_aborts,
)
from pxp.running.pxp.controlled.learn import Rep, carried_tokens, eval_views, learn
from pxp.running.pxp.controlled.probes import hook
from pxp.running.pxp.engine import Interrupted, StepResult, instance_view, interact_session
from pxp.running.pxp.evaluate import Score
from pxp.storage.store import db_session, run_sessions, session_msgs
from pxp.storage.tables import Evaluation, Experiment, Run, Session, utcnow

log = logging.getLogger(__name__)
#: estimated tokens of the system prompt and instructions around the carried sessions
SYSTEM_TOKENS = 1_000


class Observer(Protocol):
    """What the runner reports as it goes (pxp.running.pxp.controlled.progress draws it). Called from worker threads."""

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None: ...

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None: ...

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None: ...

    def run_ended(self, rep: int, status: str, note: str | None) -> None: ...


class NullObserver:
    """Reports nothing."""

    def run_started(self, rep: int, run_id: int, total: int, done: int) -> None:
        pass

    def message(self, rep: int, ordinal: int, j: int, tag: str) -> None:
        pass

    def session_done(self, rep: int, ordinal: int, status: str, kept: bool | None) -> None:
        pass

    def run_ended(self, rep: int, status: str, note: str | None) -> None:
        pass


def _reporter(obs: Observer, rep: int, ordinal: int) -> Callable[[StepResult], None]:
    """Report each stored message of session `ordinal` to the observer."""

    def seen(r: StepResult) -> None:
        obs.message(rep, ordinal, r.message.j, r.message.tag.value)

    return seen


def run_repetition(
    engine: Engine,
    exp: Experiment,
    run: Run,
    agents: Mapping[Sender, Agent],
    *,
    observer: Observer | None = None,
    stop: threading.Event | None = None,
) -> str:
    """INTERACT over the run's sessions in order, with LEARN and evaluations; returns the run's status.

    Resumes from whatever is stored: finished sessions are skipped, an open one goes on
    from its last message, a missing LEARN decision or evaluation is computed.
    """
    obs = observer or NullObserver()
    cfg = RunConfig.from_dict(exp.config)
    rid = run.id or 0
    if run.note and run.note.startswith(FORMAT_NOTE):  # paused for format failures: run those sessions again
        retry_format_aborts(engine, rid)
    with db_session(engine) as db:
        sessions = run_sessions(db, run_id=rid)
        evals = {
            (e.after_session, e.split): Score.of(e)
            for e in db.exec(select(Evaluation).where(Evaluation.run_id == rid)).all()
        }
    rep = Rep(
        engine, cfg, exp, run, agents[Sender.MACHINE], agents[Sender.HUMAN],
        eval_views(engine, cfg, exp.config, "val") if cfg.learn else [],
        eval_views(engine, cfg, exp.config, "test"),
        evals, stop or threading.Event(), policy=parse_carry(cfg.carry),
    )
    window = _window(cfg)
    warned: str | None = run.note if run.note and run.note.startswith(CONTEXT_NOTE) else None
    last = sessions[-1].ordinal if sessions else 0
    done = sum(1 for s in sessions if s.status != "open" and s.context_kept is not None)
    obs.run_started(run.repetition, rid, len(sessions), done)
    set_run_status(engine, rid, "running", None)
    pool = rep.pool = ThreadPoolExecutor(max(1, call_limit()), thread_name_prefix=f"pxp-eval-{run.repetition}")
    try:
        test_split = cfg.test_split or "test"
        if cfg.eval_at_start and rep.test and (0, test_split) not in rep.evals:
            rep.store_eval(0, test_split, rep.score(rep.test, [], None))
        carry: list[CarriedSession] = []
        last_kept = 0
        kinds: list[str | None] = []
        for s in sessions:
            assert s.id is not None
            if s.status == "open":
                context = rep.context(carry)
                if warned is None and window is not None:
                    warned = _context_warning(engine, rep, s, context, window)
                interact_session(engine, s.id, agents, carry=context, stop=rep.stop,
                                 on_message=hook(engine, cfg.probe, s.id, agents,
                                                 _reporter(obs, run.repetition, s.ordinal)))
            with db_session(engine) as db:
                row = db.get(Session, s.id)
                assert row is not None
                msgs = tuple(session_msgs(db, session_id=s.id))
            finished = row.status == "finished"
            this = CarriedSession(s.id, instance_view(engine, s.instance_id), msgs) if finished else None
            if row.context_kept is None:
                kept = learn(rep, row, carry, this, last_kept)
                obs.session_done(run.repetition, s.ordinal, row.status, kept)
            else:
                kept = bool(row.context_kept) and this is not None
            if kept and this is not None:
                carry.append(this)
                last_kept = s.ordinal
            kinds.append(format_kind(row.abort_reason) if row.status == "aborted" else None)
            if kinds[-1] is not None and format_fault(kinds, len(sessions)):
                raise FormatFault(pause_note(kinds, row.abort_reason or ""))
            if rep.test and eval_due(s.ordinal, last, cfg.eval_every) and (s.ordinal, test_split) not in rep.evals:
                prev = max((a for a, sp in rep.evals if sp == test_split and a < s.ordinal), default=0)
                if last_kept > prev:  # the carried context changed since the last evaluation
                    rep.store_eval(s.ordinal, test_split, rep.score(rep.test, rep.context(carry), s.id), s.id)
    except FormatFault as e:
        set_run_status(engine, rid, "paused", str(e))
        obs.run_ended(run.repetition, "paused", str(e))
        return "paused"
    except AgentUnavailable as e:
        set_run_status(engine, rid, "paused", f"{type(e).__name__}: {e}")
        obs.run_ended(run.repetition, "paused", str(e))
        return "paused"
    except Interrupted as e:
        set_run_status(engine, rid, "paused", str(e))
        obs.run_ended(run.repetition, "paused", str(e))
        return "paused"
    finally:
        pool.shutdown()
    set_run_status(engine, rid, "finished", warned)
    obs.run_ended(run.repetition, "finished", warned)
    return "finished"


def eval_due(ordinal: int, last: int, every: int) -> bool:
    """Whether machine performance is due after session `ordinal`: every `every`-th session and the last."""
    return ordinal % max(1, every) == 0 or ordinal == last


#: the start of the run note that warns of a prompt beyond the model's context window
CONTEXT_NOTE = "context window:"


def _window(cfg: RunConfig) -> int | None:
    """The machine's context window: config extra "context_window", else the model table (None: unknown)."""
    given = cfg.extra.get("context_window")
    return int(given) if given else context_window(cfg.machine)


def _context_warning(
    engine: Engine, rep: Rep, s: Session, context: list[CarriedSession], window: int
) -> str | None:
    """Warn once, before session `s`, when its prompt would exceed the context window (estimated).

    The warning is logged (one line on stderr) and stored as the run's note; it stays on the
    finished run. Returns it, or None while the prompt fits.
    """
    x = instance_view(engine, s.instance_id)
    tokens = sum(carried_tokens(c) for c in context) + estimate_tokens(x.payload) + SYSTEM_TOKENS
    if tokens <= window:
        return None
    note = (f"{CONTEXT_NOTE} repetition {rep.run.repetition}, session {s.ordinal}: the prompt would carry about "
            f"{tokens:,} estimated tokens ({len(context)} carried sessions, --carry {rep.cfg.carry}), beyond "
            f"{rep.cfg.machine}'s {window:,}; consider --carry tokens:T")
    log.warning("%s", note)
    set_run_status(engine, rep.run.id or 0, "running", note)
    return note


def set_run_status(engine: Engine, run_id: int, status: str, note: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(Run).where(col(Run.id) == run_id)
            .values(status=status, note=redact_any(note), updated_at=utcnow())
        )
