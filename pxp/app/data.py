"""Data functions for the pages: plain dicts, dataclasses and DataFrames, no ORM objects.

Pages never run a query themselves (DESIGN §7, the TruLens dashboard pattern).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import pandas as pd
from sqlalchemy import Engine, func, text
from sqlalchemy import select as sa_select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.pxp.facts import conformance_with_content
from pxp.protocols.pxp.intelligibility import session_flags
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.running.pxp.checks import config_errors
from pxp.running.workers.queue import TASK, is_postgres
from pxp.running.workers.queue import workers as queue_workers
from pxp.storage.tables import (
    Annotator,
    Context,
    Dataset,
    Experiment,
    Instance,
    LLMCall,
    Message,
    Run,
    Session,
)
from pxp.tasks.base import content_match
from pxp.tasks.registry import dataset_match_kind

STATUSES = ["open", "finished", "aborted"]
TAGS = [t.value for t in Tag]


def dataset_choices(engine: Engine) -> dict[str, str]:
    """Dataset name → task, in name order."""
    with DB(engine) as db:
        return {n: t for n, t in db.exec(select(Dataset.name, Dataset.task).order_by(Dataset.name)).all()}


def datasets_table(engine: Engine) -> pd.DataFrame:
    """One row per dataset with its instance count and splits."""
    with DB(engine) as db:
        counts: dict[int, int] = {
            int(i): int(c)
            for i, c in db.exec(
                select(Instance.dataset_id, func.count()).group_by(col(Instance.dataset_id))
            ).all()
        }
        rows = [
            {
                "name": d.name, "task": d.task, "instances": counts.get(d.id or 0, 0),
                "synthetic": d.synthetic, "source": d.source, "description": d.description,
            }
            for d in db.exec(select(Dataset).order_by(Dataset.name)).all()
        ]
    return pd.DataFrame(rows, columns=["name", "task", "instances", "synthetic", "source", "description"])


@dataclass(frozen=True)
class InstanceRow:
    """One instance for browsing."""

    id: int
    key: str
    split: str | None
    label: str
    payload: str
    reference_prediction: str
    reference_explanation: str
    has_image: bool
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: str
    synthetic: bool
    description: str
    source: str
    instances: int
    splits: dict[str, int]


def dataset_info(engine: Engine, name: str) -> DatasetInfo | None:
    with DB(engine) as db:
        d = db.exec(select(Dataset).where(Dataset.name == name)).first()
        if d is None:
            return None
        splits = {
            str(s or "none"): int(c)
            for s, c in db.exec(
                select(Instance.split, func.count()).where(Instance.dataset_id == d.id)
                .group_by(col(Instance.split))
            ).all()
        }
        return DatasetInfo(d.name, d.task, d.synthetic, d.description, d.source,
                           sum(splits.values()), splits)


def instances_page(
    engine: Engine, name: str, *, offset: int = 0, limit: int = 12, split: str | None = None,
) -> list[InstanceRow]:
    """A page of a dataset's instances, in order."""
    with DB(engine) as db:
        d = db.exec(select(Dataset).where(Dataset.name == name)).first()
        if d is None:
            return []
        q = select(Instance).where(Instance.dataset_id == d.id)
        if split is not None:
            q = q.where(Instance.split == (None if split == "none" else split))
        q = q.order_by(col(Instance.ordinal), col(Instance.id)).offset(offset).limit(limit)
        return [
            InstanceRow(i.id or 0, i.key, i.split, i.label, i.payload, i.reference_prediction,
                        i.reference_explanation, i.asset_sha256 is not None, dict(i.meta or {}))
            for i in db.exec(q).all()
        ]


def experiments_table(engine: Engine, *, mode: str | None = None) -> pd.DataFrame:
    """Experiments (newest first) with their sessions done."""
    with DB(engine) as db:
        q = select(Experiment).order_by(col(Experiment.id).desc())
        if mode is not None:
            q = q.where(Experiment.mode == mode)
        exps = db.exec(q).all()
        counts: dict[int, dict[str, int]] = defaultdict(dict)
        for eid, status, c in db.exec(
            select(Run.experiment_id, Session.status, func.count())
            .join(Run, col(Run.id) == col(Session.run_id))
            .group_by(col(Run.experiment_id), col(Session.status))
        ).all():
            counts[int(eid)][str(status)] = int(c)
        rows = []
        for e in exps:
            cs = counts.get(e.id or 0, {})
            rows.append({
                "id": e.id, "name": e.name, "mode": e.mode, "task": e.task,
                "dataset": str(e.config.get("dataset", "")),
                "machine": _machine_label(str(e.config.get("machine", ""))),
                "reps": int(e.config.get("reps", 1) or 1), "n": e.n, "k": e.k,
                "status": e.status, "sessions": sum(cs.values()),
                "finished": cs.get("finished", 0), "aborted": cs.get("aborted", 0),
                "problem": "; ".join(config_errors(e.config)) if e.mode == "controlled" else "",
            })
    return pd.DataFrame(rows, columns=["id", "name", "mode", "task", "dataset", "machine", "reps",
                                       "n", "k", "status", "sessions", "finished", "aborted", "problem"])


def _machine_label(machine: str) -> str:
    from pxp.running.pxp.live.assignment import machine_name

    return machine_name(machine) if machine else ""


@dataclass(frozen=True)
class SessionFilters:
    datasets: list[str]
    experiments: list[str]
    annotators: list[str]


def session_filter_options(engine: Engine) -> SessionFilters:
    with DB(engine) as db:
        return SessionFilters(
            datasets=list(db.exec(select(Dataset.name).order_by(Dataset.name)).all()),
            experiments=list(db.exec(select(Experiment.name).order_by(col(Experiment.id).desc())).all()),
            annotators=list(db.exec(select(Annotator.name).order_by(Annotator.name)).all()),
        )


def _sessions_query(
    select_what: Any, *, dataset: str | None, experiment: str | None, annotator: str | None,
    status: str | None, tag: str | None,
) -> Any:
    """The sessions matching the filters (one place for the list and its count)."""
    q = (
        select_what
        .join(Run, col(Run.id) == col(Session.run_id))
        .join(Experiment, col(Experiment.id) == col(Run.experiment_id))
        .join(Instance, col(Instance.id) == col(Session.instance_id))
        .join(Dataset, col(Dataset.id) == col(Instance.dataset_id))
        .join(Annotator, col(Annotator.id) == col(Session.annotator_id), isouter=True)
    )
    if dataset:
        q = q.where(Dataset.name == dataset)
    if experiment:
        q = q.where(Experiment.name == experiment)
    if annotator:
        q = q.where(Annotator.name == annotator)
    if status:
        q = q.where(Session.status == status)
    if tag:
        q = q.where(col(Session.id).in_(select(Message.session_id).where(Message.tag == tag)))
    return q


def sessions_count(
    engine: Engine, *, dataset: str | None = None, experiment: str | None = None,
    annotator: str | None = None, status: str | None = None, tag: str | None = None,
) -> int:
    """How many sessions match the filters."""
    q = _sessions_query(sa_select(func.count()).select_from(Session), dataset=dataset,
                        experiment=experiment, annotator=annotator, status=status, tag=tag)
    with DB(engine) as db:
        return int(db.execute(q).scalar_one())


def sessions_table(
    engine: Engine, *, dataset: str | None = None, experiment: str | None = None,
    annotator: str | None = None, status: str | None = None, tag: str | None = None,
    limit: int = 500, offset: int = 0,
) -> pd.DataFrame:
    """Sessions matching the filters (newest first, `limit` from `offset`), with their tags,
    stop reason and conformance."""
    with DB(engine) as db:
        q = _sessions_query(
            sa_select(Session, col(Experiment.name), col(Experiment.config), col(Instance.key), col(Dataset.name),
                      col(Annotator.name), col(Dataset.task), col(Dataset.config)),
            dataset=dataset, experiment=experiment, annotator=annotator, status=status, tag=tag,
        )
        rows = list(db.execute(q.order_by(col(Session.id).desc()).offset(offset).limit(limit)).all())
        sids = [r[0].id for r in rows]
        msgs: dict[int, list[Any]] = defaultdict(list)
        if sids:
            for m in db.execute(
                sa_select(
                    col(Message.session_id), col(Message.j), col(Message.sender), col(Message.tag),
                    col(Message.match), col(Message.agree), col(Message.changed), col(Message.prediction),
                    col(Message.explanation),
                )
                .where(col(Message.session_id).in_(sids))  # bounded: one page (limit)
                .order_by(col(Message.session_id), col(Message.j))
            ).all():
                msgs[int(m[0])].append(m)
    out = []
    from pxp.protocols.pxp.rules import Msg

    for s, exp_name, cfg, key, ds_name, who, task, ds_cfg in rows:
        ms = [Msg(m[1], Sender(m[2]), Tag(m[3]), m[7], m[8], m[4], m[5], m[6]) for m in msgs.get(s.id or 0, [])]
        flags = session_flags([(m.sender, m.tag) for m in ms], aborted=s.status == "aborted")
        out.append({
            "session": s.id, "experiment": exp_name, "dataset": ds_name, "instance": key,
            "annotator": who or ("proxy" if cfg.get("human", "proxy") == "proxy" else ""),
            "machine": _machine_label(str(cfg.get("machine", ""))), "status": s.status,
            "stop": s.stop_reason or (s.abort_reason or ""), "messages": len(ms),
            "tags": " ".join(f"{'m' if m.sender is Sender.MACHINE else 'h'}:{m.tag.value}" for m in ms),
            "two-way": flags["two_way"],
            "conformant": not conformance_with_content(
                ms, s.n, s.k, status=s.status, match=content_match(dataset_match_kind(task, ds_cfg))),
        })
    return pd.DataFrame(out, columns=["session", "experiment", "dataset", "instance", "annotator",
                                      "machine", "status", "stop", "messages", "tags", "two-way",
                                      "conformant"])


def message_views(engine: Engine, session_id: int) -> dict[int, str]:
    """One line per message the expert sent with an image window set ("Viewed at W 400 · L 40"):
    the `view` of its context row C_j (README "Annotate")."""
    with DB(engine) as db:
        rows = db.exec(select(Context).where(Context.session_id == session_id)).all()
    out: dict[int, str] = {}
    for c in rows:
        v = (c.content or {}).get("view")
        if isinstance(v, dict) and isinstance(v.get("width"), int | float) and isinstance(v.get("center"), int | float):
            out[c.j] = f"Viewed at W {v['width']:g} · L {v['center']:g}" + (" · inverted" if v.get("invert") else "")
    return out


def session_calls(engine: Engine, session_id: int) -> pd.DataFrame:
    """The LLM (or simulated) calls behind a session: tokens (None: the server sent no usage), latency, cost,
    errors, and the model's thinking beside its answer (docs/research.md, Local models)."""
    with DB(engine) as db:
        rows = db.exec(select(LLMCall).where(LLMCall.session_id == session_id).order_by(col(LLMCall.id))).all()
        data = [
            {
                "message": c.j, "provider": c.provider, "model": c.model, "purpose": c.purpose,
                "attempt": c.attempt, "tokens in": c.tokens_in, "tokens out": c.tokens_out,
                "cached": c.cache_read, "latency ms": round(c.latency_ms, 1),
                "cost $": c.cost_usd, "fitted": fitted(c.detail), "error": c.error or "",
                "thinking": c.thinking or "",
            }
            for c in rows
        ]
    return pd.DataFrame(data, columns=["message", "provider", "model", "purpose", "attempt",
                                       "tokens in", "tokens out", "cached", "latency ms", "cost $",
                                       "fitted", "error", "thinking"])


def fitted(detail: dict[str, Any] | None) -> str:
    """What was done to fit a call, in words: the image size sent and the context shortened."""
    detail = detail or {}
    out = []
    if isinstance(img := detail.get("image"), dict) and img.get("sent") != img.get("source"):
        (w, h), (sw, sh) = img.get("sent", (0, 0)), img.get("source", (0, 0))
        out.append(f"image {w}×{h} of {sw}×{sh} ({img.get('limit', '')})")
    if isinstance(cut := detail.get("context_shortened"), dict):
        out.append(f"context without {cut.get('carried_sessions', 0)} carried session(s) and "
                   f"{cut.get('messages', 0)} message(s)")
    return "; ".join(out)


# --- the distributed queue of `pxp run --distributed` (docs/operations.md, Workers; pxp.running.workers.queue) --------

_REPETITION_JOBS = text(
    "SELECT DISTINCT ON (j.args->>'run_id') (j.args->>'experiment_id')::int, r.repetition, j.status::text, "
    "j.worker_id, r.status FROM procrastinate_jobs j JOIN run r ON r.id = (j.args->>'run_id')::int "
    "WHERE j.task_name = :task ORDER BY j.args->>'run_id', j.id DESC"
)
QUEUE_COLUMNS = ["experiment", "todo", "doing", "failed", "succeeded"]


@dataclass(frozen=True)
class QueueView:
    """The workers alive, the queue per experiment and the worker of each queued repetition."""

    workers: pd.DataFrame  # worker (id), last heartbeat, jobs (doing)
    queue: pd.DataFrame  # QUEUE_COLUMNS: the newest job of each repetition, by status
    repetitions: dict[int, dict[int, str]]  # experiment id -> repetition -> "worker 3" | "queued" | "done" | ...


def _where(status: str, worker: int | None, alive: set[int], run: str) -> str:
    """Where a repetition is: its job's worker while queued or running, else its run's own status (a
    job cancelled before it started reads paused; one resumed in-process since reads what it is now)."""
    if status == "doing":
        return f"worker {worker}" if worker in alive else "doing (its worker stopped beating)"
    if status == "todo":
        return "queued"
    return {"finished": "done", "created": "paused"}.get(run, run)


def queue_view(engine: Engine) -> QueueView | None:
    """The queue's state, or None on SQLite, without procrastinate's tables, or with neither a job
    nor a worker alive. Reads procrastinate's tables (procrastinate_jobs, procrastinate_workers)."""
    if not is_postgres(engine):
        return None
    try:
        with engine.connect() as conn:
            if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
                return None
            rows = [(int(e), int(r), str(s), w, str(rs))
                    for e, r, s, w, rs in conn.execute(_REPETITION_JOBS, {"task": TASK})]
        alive = queue_workers(engine)
        with DB(engine) as db:
            names = {int(i or 0): n for i, n in db.exec(select(Experiment.id, Experiment.name)).all()}
    except SQLAlchemyError:  # the tables went away meanwhile, or a busy database: say nothing
        return None
    if not rows and not alive:
        return None
    live = {int(w["id"]) for w in alive}
    reps: dict[int, dict[int, str]] = defaultdict(dict)
    counts: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(QUEUE_COLUMNS[1:], 0))
    for eid, rep, status, worker, run in rows:
        reps[eid][rep] = _where(status, worker, live, run)
        if status in counts[eid]:
            counts[eid][status] += 1
    queue = pd.DataFrame([{"experiment": names.get(e, str(e)), **c} for e, c in sorted(counts.items())],
                         columns=QUEUE_COLUMNS)
    workers = pd.DataFrame(
        [{"worker": int(w["id"]), "last heartbeat": w["last_heartbeat"].astimezone(UTC).strftime("%H:%M:%S UTC"),
          "jobs": int(w["jobs"])} for w in alive], columns=["worker", "last heartbeat", "jobs"])
    return QueueView(workers, queue, {e: dict(sorted(r.items())) for e, r in reps.items()})
