"""The common-ground probe inside controlled runs (docs/research.md, Common-ground probe; RunConfig.probe, `pxp run
--probe`).

After each human message the machine is asked, privately and outside its dialogue context,
the yes/no questions of pxp.protocols.pxp.common_ground whose truth the stored session decides,
as the scorekeeping game probes after each turn. A probe never adds a message or a context row
and is never carried: the session goes exactly as it would without it. Answers are stored in
the `probe` table; every call is an LLMCall row with purpose "probe".

Human messages not probed yet (a resumed run, a probe that failed on an API error) are probed
at the session's next human message; an API error during probing stores the calls and no answers,
and never pauses the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from pxp.agents.base import Agent, AgentUnavailable, Query
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.common_ground import ProbeResult, human_turns, truths
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp import journal
from pxp.running.pxp.engine import StepResult, call_rows, instance_view, load, record_calls
from pxp.storage.store import table_of
from pxp.storage.tables import LLMCall, Probe, utcnow

_PR = table_of(Probe)


class ProbeError(PxpError, RuntimeError):
    """A probe that cannot be asked (a machine with no probe path)."""


@runtime_checkable
class Prober(Protocol):
    """A machine that answers a private yes/no question about the session so far (q.history)."""

    def probe(self, q: Query, question: str) -> bool | None: ...


def stored(engine: Engine, session_id: int) -> set[tuple[int, str]]:
    """The (j, question) pairs already probed in a session."""
    with engine.connect() as conn:
        rows = conn.execute(select(_PR.c.j, _PR.c.question).where(_PR.c.session_id == session_id))
        return {(int(r[0]), str(r[1])) for r in rows}


def probe_session(engine: Engine, session_id: int, machine: Agent) -> list[ProbeResult]:
    """Probe the machine after every human message of the session not probed yet; returns the new probes."""
    if not isinstance(machine, Prober):
        raise ProbeError(f"machine {machine.label} cannot answer probes; run without --probe")
    s = load(engine, session_id)
    done = stored(engine, session_id)
    view = instance_view(engine, s.instance_id)
    ids = {"experiment_id": s.experiment_id, "run_id": s.run_id, "session_id": session_id}
    out: list[ProbeResult] = []
    for j in human_turns(s.messages):
        q = Query(instance=view, sender=Sender.MACHINE, j=j + 1, n=s.n, k=s.k,
                  history=s.messages[:j], session_id=session_id)
        todo = {key: t for key, t in truths(q.history, j, _matcher(machine, q)).items() if (j, key) not in done}
        if not todo:
            continue
        results: list[ProbeResult] = []
        try:
            with journal.journaled(engine, j=j, **ids):
                for key, t in todo.items():
                    answer = machine.probe(q, key)
                    results.append(ProbeResult(j, key, t, answer, answer is not None))
        except AgentUnavailable:
            record_calls(engine, q.calls, j=j, **ids)
            continue
        _store(engine, q, results, j, ids)
        out.extend(results)
    return out


def _matcher(machine: Agent, q: Query) -> Callable[[str, str], bool]:
    """The machine's MATCH on two predictions (the task's rule), for `proposed_other`."""
    return lambda a, b: machine.match(a, b, q)


def _store(engine: Engine, q: Query, results: list[ProbeResult], j: int, ids: dict[str, int]) -> None:
    now = utcnow()
    rows = [{"session_id": ids["session_id"], "j": p.j, "question": p.question, "truth": p.truth,
             "answer": p.answer, "valid": p.valid, "created_at": now} for p in results]
    try:
        with engine.begin() as conn:
            if q.calls:
                conn.execute(insert(LLMCall), call_rows(q.calls, j=j, **ids))
                journal.settle(conn, q.calls)
            conn.execute(insert(_PR), rows)
    except IntegrityError:  # another process probed this message first: keep the accounting only
        record_calls(engine, q.calls, j=j, **ids)


def hook(
    engine: Engine, enabled: bool, session_id: int, agents: Mapping[Sender, Agent],
    then: Callable[[StepResult], None],
) -> Callable[[StepResult], None]:
    """interact_session's `on_message`: `then`, and when `enabled` the probes after a human message."""
    if not enabled:
        return then
    machine = agents[Sender.MACHINE]
    if not isinstance(machine, Prober):  # refused before the session's first step
        raise ProbeError(f"machine {machine.label} cannot answer probes; run without --probe")

    def seen(r: StepResult) -> None:
        then(r)
        if r.message.sender is Sender.HUMAN:
            probe_session(engine, session_id, machine)

    return seen
