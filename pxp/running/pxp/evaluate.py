"""Machine performance on a split (the follow-up paper's Method: validation and test sets).

The machine answers every instance of the split as a fresh message 1 carrying the
context it currently keeps (ASK_AGENT with C = the carried sessions, no history); the
human proxy's MATCH and AGREE compare that answer with the reference answer. Scores are
prediction accuracy (MATCH), explanation accuracy (AGREE) and both. LEARN uses the
validation split; the performance series (Figure 2 of the papers) uses the test split.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from pxp.agents.base import Agent, AgentUnavailable, CallRecord, CarriedSession, FormatFailure, InstanceView, Query
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.series import METRIC_NAMES as METRIC_NAMES  # the series live in pxp.running.pxp.series
from pxp.running.pxp.series import EvaluationError as EvaluationError
from pxp.running.pxp.series import Score as Score
from pxp.running.pxp.series import carry_forward as carry_forward
from pxp.running.pxp.series import performance_series as performance_series

EVAL_PURPOSE = "eval"


def _judge(
    machine: Agent, human: Agent, x: InstanceView, carry: Sequence[CarriedSession], n: int, k: int
) -> tuple[bool, bool, list[CallRecord]]:
    q = Query(instance=x, sender=Sender.MACHINE, j=1, n=n, k=k, history=(), carry=carry)
    hq = Query(instance=x, sender=Sender.HUMAN, j=2, n=n, k=k, history=())
    try:
        try:
            answer = machine.ask(q)
        except FormatFailure:
            return False, False, q.calls  # an unparseable answer is simply wrong here
        ref = x.reference
        try:
            pred = bool(human.match(answer.prediction, ref.prediction, hq))
        except ValueError:  # e.g. an invalid SMILES: a parse failure, counted as wrong
            pred = False
        try:
            expl = bool(human.agree(answer.explanation, ref.explanation, hq))
        except FormatFailure:  # the checker gave no usable verdict: not counted as agreeing
            expl = False
        return pred, expl, [*q.calls, *hq.calls]
    except AgentUnavailable as err:
        err.calls = [*q.calls, *hq.calls]  # type: ignore[attr-defined]  # the calls ride on the agents' exception
        raise


def evaluate(
    machine: Agent,
    human: Agent,
    instances: Sequence[InstanceView],
    carry: Sequence[CarriedSession],
    *,
    n: int = 10,
    k: int = 3,
    workers: int = 1,
    record: Callable[[list[CallRecord]], None] | None = None,
    executor: Executor | None = None,
) -> Score:
    """Accuracy of the machine with context `carry` on `instances` (in parallel up to `workers`,
    on `executor` when given, else on a pool of its own).

    Every call is handed to `record` (purpose "eval"), also when an AgentUnavailable
    interrupts the evaluation; that error is then raised.
    """
    if not instances:
        return Score(0.0, 0.0, 0.0, 0)
    carry = tuple(carry)
    results: list[tuple[bool, bool] | None] = [None] * len(instances)
    calls: list[CallRecord] = []
    failure: AgentUnavailable | None = None

    def one(i: int) -> None:
        nonlocal failure
        try:
            pred, expl, cs = _judge(machine, human, instances[i], carry, n, k)
        except AgentUnavailable as err:
            failure = failure or err
            calls.extend(getattr(err, "calls", []))
            return
        results[i] = (pred, expl)
        calls.extend(cs)

    if workers <= 1 or len(instances) == 1:
        for i in range(len(instances)):
            one(i)
            if failure is not None:
                break
    else:
        # each task runs in a copy of the caller's context, so the call journal (pxp.running.pxp.journal) reaches it
        parent = contextvars.copy_context()

        def in_context(i: int) -> None:
            parent.copy().run(one, i)

        if executor is not None:
            list(executor.map(in_context, range(len(instances))))
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(instances)), thread_name_prefix="pxp-eval") as pool:
                list(pool.map(in_context, range(len(instances))))
    for c in calls:
        c.purpose = EVAL_PURPOSE
    if record is not None:
        record(calls)
    if failure is not None:
        raise failure
    done = [r for r in results if r is not None]
    total = len(done)
    return Score(
        prediction=sum(p for p, _ in done) / total,
        explanation=sum(e for _, e in done) / total,
        both=sum(p and e for p, e in done) / total,
        instances=total,
    )
