"""The engine: one `step(session)` used by every driver (DESIGN §3).

Each step loads the session's messages, decides whose turn it is, asks that agent
(AGENT, Procedure 2), computes the tag with the AGENT rule, and inserts the message
and its context row in one transaction. The unique (session_id, j) key makes a
concurrent duplicate step lose cleanly: it raises StepConflict and writes nothing.
The refusals are in pxp.running.pxp.errors, the instance views in pxp.running.pxp.instances.
A `guard` (e.g. "this annotator still holds the session", pxp.team.access) runs as the
first statement of that same transaction, so the database decides it together with the write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, insert, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from pxp.agents.base import (
    Agent,
    AgentUnavailable,
    Answer,
    CallRecord,
    CarriedSession,
    FormatFailure,
    Query,
    call_fields,
)
from pxp.protocols.pxp.rules import (
    Msg,
    ProtocolError,
    Sender,
    Tag,
    agent_tag,
    check_tag,
    missing_reason,
    next_sender,
    stop_reason,
)
from pxp.running.pxp import journal
from pxp.running.pxp.errors import Interrupted as Interrupted  # the engine's refusals, re-exported
from pxp.running.pxp.errors import SessionClosed as SessionClosed
from pxp.running.pxp.errors import StepConflict as StepConflict
from pxp.running.pxp.errors import StepError as StepError
from pxp.running.pxp.errors import StepRefused as StepRefused
from pxp.running.pxp.errors import TagRefused as TagRefused
from pxp.running.pxp.instances import instance_view as instance_view
from pxp.storage.store import table_of
from pxp.storage.tables import Context, LLMCall, Message, Run, Session, utcnow

#: run first in the step's write transaction; returns why the write is refused, or None to go on
Guard = Callable[[Connection], str | None]
#: run last in the step's write transaction, after the message is inserted (e.g. its audit row)
Also = Callable[[Connection, Msg], None]


@dataclass(frozen=True)
class StepResult:
    """What a step produced: the message, and the stop reason if the session ended."""

    session_id: int
    message: Msg
    stopped: str | None
    aborted: str | None = None

    @property
    def finished(self) -> bool:
        return self.stopped is not None or self.aborted is not None


def call_rows(
    calls: Sequence[CallRecord],
    *,
    experiment_id: int | None,
    run_id: int | None,
    session_id: int | None,
    j: int | None,
) -> list[dict[str, Any]]:
    """LLMCall row values for the calls of a step, an abort or an evaluation."""
    now = utcnow()
    return [
        {
            "experiment_id": experiment_id,
            "run_id": run_id,
            "session_id": session_id,
            "j": j,
            **call_fields(c),
            "thinking": c.thinking,
            "detail": c.detail,
            "created_at": now,
        }
        for c in calls
    ]


def record_calls(
    engine: Engine,
    calls: Sequence[CallRecord],
    *,
    experiment_id: int | None = None,
    run_id: int | None = None,
    session_id: int | None = None,
    j: int | None = None,
) -> None:
    """Store accounting rows outside a step (failed steps, evaluations)."""
    if not calls:
        return
    rows = call_rows(calls, experiment_id=experiment_id, run_id=run_id, session_id=session_id, j=j)
    with engine.begin() as conn:
        conn.execute(insert(LLMCall), rows)
        journal.settle(conn, calls)


def decide(agent: Agent, q: Query) -> tuple[Tag, Answer, bool | None, bool | None, bool | None]:
    """AGENT(λ, j): ask, evaluate the guards, and tag the message (DESIGN §1).

    When `changed` is false the message carries λ's previous answer verbatim.
    """
    answer = agent.ask(q)
    if q.j == 1:
        return Tag.INIT, answer, None, None, None
    other = q.history[-1]
    own = q.own_previous
    previous = Answer(own.prediction, own.explanation) if own is not None else answer
    supplied = agent.facts(q, answer)
    if supplied is not None:
        match, agree, changed = supplied.match, supplied.agree, supplied.changed
        if q.j == 2:
            changed = False
    else:
        match = agent.match(other.prediction, previous.prediction, q)
        agree = agent.agree(other.explanation, previous.explanation, q)
        changed = q.j > 2 and (
            not agent.match(answer.prediction, previous.prediction, q)
            or not agent.agree(answer.explanation, previous.explanation, q)
        )
    tag = agent_tag(q.j, q.k, match, agree, changed)
    if supplied is not None and supplied.tag is not None and supplied.tag is not tag:
        reason = check_tag(supplied.tag, q.j, q.k, match, agree, changed)
        raise TagRefused(reason or f"the AGENT rule gives {tag.value} here")
    if not changed:
        answer = previous
    return tag, answer, match, agree, changed


@dataclass(frozen=True)
class Loaded:
    """What a step needs of the stored session (read in one short connection)."""

    session_id: int
    run_id: int
    experiment_id: int
    instance_id: int
    status: str
    n: int
    k: int
    messages: list[Msg]


_S = table_of(Session)
_R = table_of(Run)
_M = table_of(Message)
_C = table_of(Context)
_L = table_of(LLMCall)
_LOAD_SESSION = (
    sa_select(_S.c.run_id, _R.c.experiment_id, _S.c.instance_id, _S.c.status, _S.c.n, _S.c.k)
    .join(_R, _R.c.id == _S.c.run_id)
    .where(_S.c.id == bindparam("sid"))
)
_LOAD_MESSAGES = (
    sa_select(_M.c.j, _M.c.sender, _M.c.tag, _M.c.prediction, _M.c.explanation, _M.c.match, _M.c.agree, _M.c.changed)
    .where(_M.c.session_id == bindparam("sid"))
    .order_by(_M.c.j)
)


def load(engine: Engine, session_id: int) -> Loaded:
    """The session, its run and its messages (event sourcing: state is the messages)."""
    with engine.connect() as conn:
        row = conn.execute(_LOAD_SESSION, {"sid": session_id}).first()
        if row is None:
            raise StepError(f"session {session_id} does not exist")
        msgs = [
            Msg(r[0], Sender(r[1]), Tag(r[2]), r[3], r[4], r[5], r[6], r[7])
            for r in conn.execute(_LOAD_MESSAGES, {"sid": session_id})
        ]
    return Loaded(session_id, row[0], row[1], row[2], row[3], row[4], row[5], msgs)


def step(
    engine: Engine,
    session_id: int,
    agents: Mapping[Sender, Agent],
    *,
    carry: Sequence[CarriedSession] = (),
    guard: Guard | None = None,
    also: Also | None = None,
) -> StepResult:
    """Take the next step of a session: one message, stored atomically.

    Raises SessionClosed for a finished/aborted session, StepConflict when another
    process stored message j first, AgentUnavailable (nothing written, resumable),
    TagRefused for a forbidden tag chosen directly, and StepRefused when `guard`, run first
    in the write transaction, refuses (its row locks hold until the commit). `also` runs last in
    that transaction, so what it writes (an audit row) is stored with the message or not at all.
    A FormatFailure aborts the session.
    """
    s = load(engine, session_id)
    if s.status != "open":
        raise SessionClosed(f"session {session_id} is {s.status}; it takes no further steps")
    sender = next_sender(s.messages, s.n)
    if sender is None:
        raise SessionClosed(f"session {session_id} has already stopped")
    j = len(s.messages) + 1
    view = instance_view(engine, s.instance_id)
    q = Query(
        instance=view,
        sender=sender,
        j=j,
        n=s.n,
        k=s.k,
        history=s.messages,
        carry=carry if sender is Sender.MACHINE else (),
        session_id=session_id,
    )
    agent = agents[sender]
    ids: dict[str, int | None] = {
        "experiment_id": s.experiment_id,
        "run_id": s.run_id,
        "session_id": session_id,
    }
    try:
        with journal.journaled(engine, j=j, **ids):
            tag, answer, match, agree, changed = decide(agent, q)
    except FormatFailure as err:
        abort(engine, session_id, str(err), calls=q.calls, j=j, **_ids(ids))
        return StepResult(session_id, Msg(j, sender, Tag.INIT), None, aborted=str(err))
    except (AgentUnavailable, TagRefused, ProtocolError):
        record_calls(engine, q.calls, j=j, **ids)
        raise
    if (why := missing_reason(tag, answer.explanation)) is not None:  # a disagreement carries its reason
        record_calls(engine, q.calls, j=j, **ids)
        raise TagRefused(why)
    msg = Msg(j, sender, tag, answer.prediction, answer.explanation, match, agree, changed)
    stopped = stop_reason([*s.messages, msg], s.n)
    content = agent.context(q, answer, tag)
    now = utcnow()
    try:
        with engine.begin() as conn:
            why = guard(conn) if guard is not None else None
            if why is not None:
                raise StepRefused(why)
            call_id = None
            if q.calls:
                rows = call_rows(q.calls, j=j, **ids)
                for row in rows:
                    pk = conn.execute(_L.insert(), row).inserted_primary_key
                    call_id = pk[0] if pk is not None else None
                journal.settle(conn, q.calls)
            conn.execute(
                _M.insert(),
                {
                    "session_id": session_id,
                    "j": j,
                    "sender": sender.value,
                    "receiver": sender.other.value,
                    "tag": tag.value,
                    "prediction": answer.prediction,
                    "explanation": answer.explanation,
                    "match": match,
                    "agree": agree,
                    "changed": changed,
                    "llm_call_id": call_id,
                    "created_at": now,
                },
            )
            conn.execute(_C.insert(), {"session_id": session_id, "j": j, "content": content})
            if stopped is not None:
                conn.execute(
                    _S.update().where(_S.c.id == session_id),
                    {"status": "finished", "stop_reason": stopped, "updated_at": now},
                )
            if also is not None:
                also(conn, msg)
    except IntegrityError as err:
        record_calls(engine, q.calls, j=j, **ids)
        raise StepConflict(f"message {j} of session {session_id} was stored by another step") from err
    except StepRefused:
        record_calls(engine, q.calls, j=j, **ids)
        raise
    return StepResult(session_id, msg, stopped)


def _ids(ids: dict[str, int | None]) -> dict[str, int | None]:
    return {k: v for k, v in ids.items() if k != "session_id"}


def abort(
    engine: Engine,
    session_id: int,
    reason: str,
    *,
    calls: Sequence[CallRecord] = (),
    j: int | None = None,
    experiment_id: int | None = None,
    run_id: int | None = None,
) -> None:
    """Mark an open session aborted with its reason (format failures, DESIGN §1)."""
    with engine.begin() as conn:
        if calls:
            conn.execute(
                insert(LLMCall),
                call_rows(calls, experiment_id=experiment_id, run_id=run_id, session_id=session_id, j=j),
            )
            journal.settle(conn, calls)
        conn.execute(
            update(Session)
            .where(col(Session.id) == session_id, col(Session.status) == "open")
            .values(status="aborted", abort_reason=reason, updated_at=utcnow())
        )


def interact_session(
    engine: Engine,
    session_id: int,
    agents: Mapping[Sender, Agent],
    *,
    carry: Sequence[CarriedSession] = (),
    stop: threading.Event | None = None,
    on_message: Callable[[StepResult], None] | None = None,
) -> list[StepResult]:
    """INTERACT's inner loop for one session (Procedure 1): step until it stops or aborts.

    The one session loop of every driver (the controlled runner's repetitions included). It
    resumes mid-session from the stored messages; a step another process stored first is
    loaded and the loop goes on; a closed session ends it. `on_message` sees each stored
    message; `stop` (set by Ctrl-C) raises Interrupted before the next step.
    """
    results: list[StepResult] = []
    while True:
        if stop is not None and stop.is_set():
            raise Interrupted("interrupted by the user")
        try:
            r = step(engine, session_id, agents, carry=carry)
        except StepConflict:
            continue  # another process stored this step: load and go on
        except SessionClosed:
            return results
        results.append(r)
        if r.aborted is not None:  # nothing was stored
            return results
        if on_message is not None:
            on_message(r)
        if r.finished:
            return results
