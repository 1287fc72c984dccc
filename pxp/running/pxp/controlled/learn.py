"""LEARN and the evaluations of a repetition (DESIGN §1; the follow-up paper's Method).
docs/research.md, Evaluation schedules: the validation and test sets may be fixed seeded samples of their splits
(`eval_views`), and the carry policy (`select_carry`: all, last:M, tokens:T) picks which
kept sessions go into a prompt; LEARN's state is still every kept session.

After each session its context is kept only if the machine's validation accuracy with it
does not drop (ties keep it); `learn=False` always keeps. The decision, both validation
accuracies and a note are stored on the Session, so LEARN state is rebuilt from the
database on resume (`carried`). Machine performance on the test split is stored as
Evaluation rows, keyed (run, after_session, split): a row already there wins.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from pxp.agents.base import Agent, AgentUnavailable, CallRecord, CarriedSession, InstanceView
from pxp.llm.limits import call_limit
from pxp.llm.models import IMAGE_TOKENS, estimate_tokens
from pxp.running.pxp import journal
from pxp.running.pxp.config import Carry, RunConfig, RunError, sample_ids
from pxp.running.pxp.engine import call_rows, instance_view, record_calls
from pxp.running.pxp.evaluate import Score, evaluate
from pxp.storage.store import dataset_instances, db_session, find_dataset, run_sessions, session_msgs
from pxp.storage.tables import Evaluation, Experiment, LLMCall, Run, Session, utcnow


def carried(engine: Engine, run_id: int, before_ordinal: int) -> list[CarriedSession]:
    """The kept sessions of a run before `before_ordinal` (LEARN state, from the database)."""
    out = []
    with db_session(engine) as db:
        for s in run_sessions(db, run_id=run_id):
            if s.ordinal >= before_ordinal:
                break
            if s.context_kept and s.id is not None:
                msgs = tuple(session_msgs(db, session_id=s.id))
                out.append(CarriedSession(s.id, instance_view(engine, s.instance_id, db), msgs))
    return out


#: per-message overhead of a carried session's rendering (tags, labels), in estimated tokens
MESSAGE_OVERHEAD = 12
_token_cache: dict[tuple[int, int], int] = {}


def carried_tokens(c: CarriedSession) -> int:
    """Estimated tokens of one carried session in a prompt (its instance, messages and image)."""
    key = (c.session_id, len(c.messages))
    if key not in _token_cache:
        x = c.instance
        n = estimate_tokens(x.payload) + (IMAGE_TOKENS if x.asset_sha256 else 0)
        n += sum(estimate_tokens(f"{m.prediction or ''} {m.explanation or ''}") + MESSAGE_OVERHEAD
                 for m in c.messages)
        _token_cache[key] = n
    return _token_cache[key]


def select_carry(carry: Sequence[CarriedSession], policy: Carry) -> list[CarriedSession]:
    """The kept sessions a prompt carries: all; the last M; or as many of the latest as fit T tokens.

    Order is kept (oldest first), as the paper's prompt lists them.
    """
    kind, value = policy
    if kind == "all" or value is None:
        return list(carry)
    if kind == "last":
        return list(carry[-value:])
    out: list[CarriedSession] = []
    used = 0
    for c in reversed(carry):
        t = carried_tokens(c)
        if used + t > value:
            break
        used += t
        out.append(c)
    return out[::-1]


def eval_views(engine: Engine, cfg: RunConfig, stored: dict[str, Any], which: str) -> list[InstanceView]:
    """The validation (`which`="val") or test set of a run: the split, or its fixed seeded sample.

    The sample's instance ids are stored with the experiment (config["resolved"][which]["sample"]);
    a config without them draws the same sample from the seed.
    """
    split = cfg.val_split if which == "val" else cfg.test_split
    size = cfg.learn_sample if which == "val" else cfg.eval_sample
    views = split_views(engine, cfg.dataset, split)
    if size is None or size >= len(views):
        return views
    ids = ((stored.get("resolved") or {}).get(which) or {}).get("sample")
    if ids is None:
        ids = sample_ids([v.id for v in views], size, cfg.seed, which)
    keep = set(ids)
    return [v for v in views if v.id in keep]


@dataclass
class Rep:
    """What one repetition needs while it runs."""

    engine: Engine
    cfg: RunConfig
    exp: Experiment
    run: Run
    machine: Agent
    human: Agent
    val: list[InstanceView]
    test: list[InstanceView]
    evals: dict[tuple[int, str], Score]
    stop: threading.Event
    pool: ThreadPoolExecutor | None = None
    policy: Carry = ("all", None)

    def context(self, carry: Sequence[CarriedSession]) -> list[CarriedSession]:
        """What a prompt carries of the kept sessions `carry` (the run's carry policy)."""
        return select_carry(carry, self.policy)

    def score(
        self, instances: list[InstanceView], carry: Sequence[CarriedSession], session_id: int | None
    ) -> Scored:
        """The machine's score with context `carry`, and its calls to store with it.

        Each call is journaled when sent (pxp.running.pxp.journal), so a crash mid-evaluation leaves it
        counted as of unknown outcome. When an AgentUnavailable interrupts the evaluation its
        calls are stored at once.
        """
        calls: list[CallRecord] = []
        try:
            with journal.journaled(self.engine, experiment_id=self.exp.id, run_id=self.run.id,
                                   session_id=session_id, j=None):
                score = evaluate(
                    self.machine, self.human, instances, carry, n=self.cfg.n, k=self.cfg.k,
                    workers=call_limit(), record=calls.extend, executor=self.pool,
                )
        except AgentUnavailable:
            record_calls(self.engine, calls, experiment_id=self.exp.id, run_id=self.run.id, session_id=session_id)
            raise
        return score, calls

    def rows(self, calls: list[CallRecord], session_id: int | None) -> list[dict[str, Any]]:
        return call_rows(calls, experiment_id=self.exp.id, run_id=self.run.id, session_id=session_id, j=None)

    def store_eval(self, after: int, split: str, scored: Scored, session_id: int | None = None) -> Score:
        """Insert an Evaluation row with its calls, in one transaction; a row already there wins."""
        s, calls = scored
        try:
            with self.engine.begin() as conn:
                store_calls(conn, self.rows(calls, session_id), calls)
                conn.execute(insert(Evaluation).values(**_eval_values(self.run.id or 0, after, split, s)))
        except IntegrityError:
            with self.engine.begin() as conn:
                store_calls(conn, self.rows(calls, session_id), calls)
        self.evals.setdefault((after, split), s)
        return s


Scored = tuple[Score, list[CallRecord]]


def store_calls(conn: Any, rows: list[dict[str, Any]], calls: list[CallRecord]) -> None:
    """Insert the LLMCall rows and settle their journal entries, in the caller's transaction."""
    if rows:
        conn.execute(insert(LLMCall), rows)
        journal.settle(conn, calls)


def _eval_values(run_id: int, after: int, split: str, s: Score) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "after_session": after,
        "split": split,
        "prediction_accuracy": s.prediction,
        "explanation_accuracy": s.explanation,
        "both_accuracy": s.both,
        "instances": s.instances,
        "created_at": utcnow(),
    }


def split_views(engine: Engine, dataset: str, split: str | None) -> list[InstanceView]:
    if split is None:
        return []
    with db_session(engine) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None or ds.id is None:
            raise RunError(f"no dataset named {dataset!r}")
        return [instance_view(engine, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id, split=split)]


def learn(rep: Rep, s: Session, carry: list[CarriedSession], this: CarriedSession | None, last_kept: int) -> bool:
    """LEARN after session s: keep its context iff validation accuracy does not drop (returns kept)."""
    cfg = rep.cfg
    val_split = cfg.val_split or "val"  # evaluations are stored under the split's own name
    before = after = None
    trial_calls: list[dict[str, Any]] = []
    trial_records: list[CallRecord] = []
    if s.status == "aborted" or this is None:
        kept, note = False, "dropped: the session was aborted"
    elif not cfg.learn:
        kept, note = True, "kept: LEARN is off (--no-learn)"
    elif not rep.val:
        kept, note = True, f"kept: no validation instances in split {cfg.val_split!r}, LEARN cannot check"
    else:
        metric = cfg.learn_metric
        base = rep.evals.get((last_kept, val_split))
        if base is None:  # first decision, or a crash before it was stored
            base = rep.store_eval(last_kept, val_split, rep.score(rep.val, rep.context(carry), None))
        trial, trial_records = rep.score(rep.val, rep.context([*carry, this]), s.id)
        trial_calls = rep.rows(trial_records, s.id)
        before, after = base.metric(metric), trial.metric(metric)
        kept = after >= before
        verdict = "kept" if kept else "dropped"
        note = f"{verdict}: validation {metric} accuracy {before:.3f} -> {after:.3f} ({len(rep.val)} instances)"
    with rep.engine.begin() as conn:
        if before is not None:
            store_calls(conn, trial_calls, trial_records)
        res = conn.execute(
            update(Session)
            .where(col(Session.id) == s.id, col(Session.context_kept).is_(None))
            .values(context_kept=kept, learn_note=note, learn_val_before=before, learn_val_after=after,
                    updated_at=utcnow())
        )
        if res.rowcount == 1 and kept and after is not None:
            conn.execute(insert(Evaluation).values(**_eval_values(rep.run.id or 0, s.ordinal, val_split, trial)))
    if res.rowcount == 1:
        if kept and after is not None:
            rep.evals[(s.ordinal, val_split)] = trial
        return kept
    with db_session(rep.engine) as db:  # another process decided first: its decision stands
        row = db.get(Session, s.id)
        return bool(row and row.context_kept)
