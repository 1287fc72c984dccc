"""Live experiments: INTERACT(X, n, k) with the human in the browser (DESIGN §1, §3).

A live experiment (mode "live") has one Run whose `instance_order` is the queue of
instances. An annotator claims the next instance by inserting its Session with the
instance's position as `ordinal`: the unique (run_id, ordinal) key makes the claim
atomic on SQLite and PostgreSQL alike, so two annotators never get the same session.
An annotator's own open session is resumed first; a session abandoned by someone else
(idle for a while) can be taken over with a conditional UPDATE.

Each human turn is one engine step with a BrowserHuman, then one step of the machine
(simulated or an LLM). The engine's unique (session_id, j) key makes a repeated
submission lose cleanly (StepConflict), so every step happens exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Engine, func, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.agents.base import Agent, Answer, Facts, Query
from pxp.agents.browser import BrowserHuman
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.intelligibility import session_flags
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, conformance, next_sender
from pxp.running import audit
from pxp.running.config import RunConfig, RunError, rep_seed
from pxp.running.engine import SessionClosed, StepConflict, StepResult, TagRefused, step
from pxp.running.runner import unique_name
from pxp.storage.store import dataset_instances, db_session, find_dataset, session_msgs
from pxp.storage.tables import Annotator, Asset, Dataset, Experiment, Instance, Message, Run, Session, utcnow
from pxp.tasks.base import task_match_kind

SIMULATED_NAME = "Simulated agent"


class LiveError(PxpError, RuntimeError):
    """A live-annotation problem worth one clear line to the user."""


# --- annotators and experiments ----------------------------------------------------------


def ensure_annotator(engine: Engine, *, name: str, role: str = "") -> int:
    """The annotator's id, creating the row on first use (names are unique)."""
    name = " ".join(name.split())
    if not name:
        raise LiveError("please enter your name")
    if len(name) > 200:
        raise LiveError("the name is too long (200 characters at most)")
    for _ in range(3):
        with db_session(engine) as db:
            row = db.exec(select(Annotator).where(Annotator.name == name)).first()
            if row is not None:
                if role and row.role != role:
                    row.role = role[:100]
                    db.add(row)
                return row.id or 0
        try:
            with db_session(engine) as db:
                a = Annotator(name=name, role=role[:100])
                db.add(a)
                db.flush()
                return a.id or 0
        except IntegrityError:
            continue  # created concurrently: read it back
    raise LiveError(f"could not register annotator {name!r}")


def machine_name(machine: str) -> str:
    """How the machine agent is shown: the simulated one is always labelled as such."""
    return SIMULATED_NAME if machine == "simulated" else machine


def create_live_experiment(
    engine: Engine, *, dataset: str, name: str | None = None, n: int = 10, k: int = 3,
    machine: str = "simulated", checker: str = "lexical", base_url: str | None = None,
    seed: int = 0, shuffle: bool = False, split: str | None = None,
    temperature: float | None = None, max_tokens: int | None = None,
) -> int:
    """A live experiment over a dataset: one Run whose instance order is the claim queue."""
    if n < 2 or k < 1:
        raise LiveError("n must be at least 2 and k at least 1")
    cfg = RunConfig(
        dataset=dataset, split=split, machine=machine, human="browser", checker=checker,
        base_url=base_url, n=n, k=k, seed=seed, shuffle=shuffle, reps=1,
        temperature=temperature if machine != "simulated" else None, max_tokens=max_tokens or None,
    )
    name = (name or "").strip() or unique_name(engine, f"live-{dataset}")
    with db_session(engine) as db:
        ds = find_dataset(db, name=dataset)
        if ds is None or ds.id is None:
            raise LiveError(f"no dataset named {dataset!r}")
        if db.exec(select(Experiment).where(Experiment.name == name)).first() is not None:
            raise LiveError(f"an experiment named {name!r} already exists")
        order = [i.id for i in dataset_instances(db, dataset_id=ds.id, split=split)
                 if i.id is not None]
        if not order:
            raise LiveError(f"dataset {dataset!r} has no instances")
        if shuffle:
            import random

            random.Random(rep_seed(seed, 1)).shuffle(order)
        exp = Experiment(name=name, task=ds.task, mode="live", status="running", n=n, k=k,
                         config=cfg.as_dict())
        db.add(exp)
        db.flush()
        db.add(Run(experiment_id=exp.id or 0, repetition=1, seed=rep_seed(seed, 1),
                   status="running", instance_order=order))
        return exp.id or 0


@dataclass(frozen=True)
class LiveExperimentInfo:
    """A live experiment as the Annotate page lists it."""

    id: int
    name: str
    dataset: str
    task: str
    machine: str
    n: int
    k: int
    instances: int
    finished: int
    open: int

    @property
    def remaining(self) -> int:
        return self.instances - self.finished - self.open


def live_experiments(engine: Engine, *, dataset: str | None = None) -> list[LiveExperimentInfo]:
    """Live experiments (newest first), with their progress."""
    with DB(engine) as db:
        exps = db.exec(
            select(Experiment).where(Experiment.mode == "live").order_by(Experiment.id.desc())  # type: ignore[union-attr]
        ).all()
        out = []
        for e in exps:
            ds_name = str(e.config.get("dataset", ""))
            if dataset is not None and ds_name != dataset:
                continue
            run = db.exec(select(Run).where(Run.experiment_id == e.id)).first()
            counts: dict[str, int] = {}
            if run is not None:
                for status, c in db.exec(
                    select(Session.status, func.count()).where(Session.run_id == run.id)
                    .group_by(Session.status)
                ).all():
                    counts[status] = int(c)
            out.append(LiveExperimentInfo(
                id=e.id or 0, name=e.name, dataset=ds_name, task=e.task,
                machine=str(e.config.get("machine", "simulated")), n=e.n, k=e.k,
                instances=len(run.instance_order) if run is not None else 0,
                finished=counts.get("finished", 0) + counts.get("aborted", 0),
                open=counts.get("open", 0),
            ))
    return out


# --- claims --------------------------------------------------------------------------------


def _live_run(db: DB, experiment_id: int) -> tuple[Experiment, Run]:
    exp = db.get(Experiment, experiment_id)
    if exp is None or exp.mode != "live":
        raise LiveError(f"live experiment {experiment_id} does not exist")
    run = db.exec(select(Run).where(Run.experiment_id == experiment_id)).first()
    if run is None or run.id is None:
        raise LiveError(f"live experiment {exp.name!r} has no run")
    return exp, run


def own_open_session(engine: Engine, *, experiment_id: int, annotator_id: int) -> int | None:
    """The annotator's open session in this experiment, to resume, if any."""
    with DB(engine) as db:
        _, run = _live_run(db, experiment_id)
        sid = db.exec(
            select(Session.id).where(
                Session.run_id == run.id, Session.annotator_id == annotator_id,
                Session.status == "open",
            ).order_by(Session.ordinal)  # type: ignore[arg-type]
        ).first()
    return sid


def claim_next(engine: Engine, *, experiment_id: int, annotator_id: int) -> int | None:
    """The session to annotate next: the annotator's own open one, else a new claim.

    A claim inserts the Session with the instance's queue position as its ordinal;
    the unique (run_id, ordinal) key lets exactly one annotator win each position.
    None when every instance has been claimed.
    """
    own = own_open_session(engine, experiment_id=experiment_id, annotator_id=annotator_id)
    if own is not None:
        return own
    with DB(engine) as db:
        exp, run = _live_run(db, experiment_id)
        taken = set(db.exec(select(Session.ordinal).where(Session.run_id == run.id)).all())
        order = list(run.instance_order)
    for pos, iid in enumerate(order, start=1):
        if pos in taken:
            continue
        now = utcnow()
        try:
            with engine.begin() as conn:
                res = conn.execute(
                    insert(Session).returning(col(Session.id)),
                    [{
                        "run_id": run.id, "instance_id": iid, "ordinal": pos, "n": exp.n,
                        "k": exp.k, "status": "open", "annotator_id": annotator_id,
                        "created_at": now, "updated_at": now,
                    }],
                )
                sid = int(res.scalar_one() or 0)
            audit.record(engine, "opened", session_id=sid, annotator_id=annotator_id)
            return sid
        except IntegrityError:
            continue  # another annotator claimed this position first
    return None


@dataclass(frozen=True)
class AbandonedSession:
    """An open session nobody has touched for a while."""

    session_id: int
    ordinal: int
    instance_key: str
    annotator: str
    messages: int
    idle_minutes: int


def _last_activity(db: DB, s: Session) -> datetime:
    last = db.exec(select(func.max(Message.created_at)).where(Message.session_id == s.id)).one()
    times = [t for t in (s.updated_at, last) if t is not None]
    return max(_aware(t) for t in times)


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def abandoned_sessions(
    engine: Engine, *, experiment_id: int, idle_minutes: float = 30, exclude_annotator: int | None = None,
) -> list[AbandonedSession]:
    """Open sessions of other annotators idle for at least `idle_minutes`."""
    now = datetime.now(UTC)
    out = []
    with DB(engine) as db:
        _, run = _live_run(db, experiment_id)
        rows = db.exec(
            select(Session, Instance.key, Annotator.name)
            .join(Instance, Instance.id == Session.instance_id)  # type: ignore[arg-type]
            .join(Annotator, Annotator.id == Session.annotator_id, isouter=True)  # type: ignore[arg-type]
            .where(Session.run_id == run.id, Session.status == "open")
            .order_by(Session.ordinal)  # type: ignore[arg-type]
        ).all()
        for s, key, who in rows:
            if exclude_annotator is not None and s.annotator_id == exclude_annotator:
                continue
            idle = now - _last_activity(db, s)
            if idle >= timedelta(minutes=idle_minutes):
                n_msgs = db.exec(select(func.count()).where(Message.session_id == s.id)).one()
                out.append(AbandonedSession(s.id or 0, s.ordinal, key, who or "nobody",
                                            int(n_msgs), int(idle.total_seconds() // 60)))
    return out


def take_over(
    engine: Engine, *, session_id: int, annotator_id: int, idle_minutes: float = 30,
) -> bool:
    """Resume an abandoned open session as this annotator (a conditional UPDATE).

    Succeeds only while the session is open and idle for `idle_minutes` (no update and
    no message since); the winner's update makes it active again, so when several
    people take over at once exactly one wins.
    """
    cutoff = datetime.now(UTC) - timedelta(minutes=idle_minutes)
    recent = select(Message.id).where(
        Message.session_id == session_id, col(Message.created_at) >= cutoff
    )
    with engine.begin() as conn:
        res = conn.execute(
            update(Session)
            .where(
                col(Session.id) == session_id,
                col(Session.status) == "open",
                col(Session.updated_at) < cutoff,
                ~recent.exists(),
            )
            .values(annotator_id=annotator_id, updated_at=utcnow())
        )
    if res.rowcount == 1:
        audit.took_over(engine, session_id, annotator_id)
    return bool(res.rowcount == 1)


# --- the session as the Annotate page sees it ------------------------------------------------


@dataclass(frozen=True)
class LiveSession:
    """Everything the Annotate page shows about one session (plain data, no ORM)."""

    id: int
    experiment_id: int
    experiment: str
    ordinal: int
    instances: int
    instance_id: int
    instance_key: str
    task: str
    match_kind: str
    dataset: str
    synthetic: bool
    payload: str
    asset_sha256: str | None
    image_meta: dict[str, Any]
    meta: dict[str, Any]
    labels: list[str]
    n: int
    k: int
    status: str
    stop_reason: str | None
    abort_reason: str | None
    machine: str
    annotator: str | None
    messages: list[Msg] = field(default_factory=list)

    @property
    def j(self) -> int:
        """The number of the next message."""
        return len(self.messages) + 1

    @property
    def turn(self) -> Sender | None:
        """Whose turn it is (None once the session stopped or is not open)."""
        if self.status != "open":
            return None
        return next_sender(self.messages, self.n)

    @property
    def machine_label(self) -> str:
        return machine_name(self.machine)

    @property
    def is_simulated(self) -> bool:
        return self.machine == "simulated"

    def last_from(self, sender: Sender) -> Msg | None:
        for m in reversed(self.messages):
            if m.sender is sender:
                return m
        return None

    def flags(self) -> dict[str, bool]:
        """The session's intelligibility (Definitions 1 and 2)."""
        return session_flags([(m.sender, m.tag) for m in self.messages],
                             aborted=self.status == "aborted")

    def violations(self) -> list[str]:
        return [str(v) for v in conformance(self.messages, self.n, self.k, status=self.status)]


def dataset_task(db: DB, ds: Dataset) -> tuple[str, list[str]]:
    """The dataset's MATCH kind and label set (RAD, DRUG, or its custom task config)."""
    from pxp.tasks.registry import task_spec

    config = dict(ds.config or {})
    try:
        spec = task_spec(ds.task, config, dataset_labels(db, ds) if ds.task == "rad" else ())
    except ValueError:
        return task_match_kind(ds.task, config), []
    kind = spec.match_kind
    labels = list(spec.labels) or (dataset_labels(db, ds) if kind == "label" else [])
    return kind, labels


def dataset_labels(db: DB, ds: Dataset) -> list[str]:
    """The label set of a RAD/label dataset: config["labels"], else its distinct labels."""
    labels = ds.config.get("labels") if isinstance(ds.config, dict) else None
    if isinstance(labels, list) and labels:
        return [str(x) for x in labels]
    rows = db.exec(
        select(Instance.reference_prediction, Instance.label).where(Instance.dataset_id == ds.id)
    ).all()
    out: list[str] = []
    for pred, lab in rows:
        for v in (lab, pred):
            if v and v not in out and len(v) <= 80:
                out.append(v)
    return sorted(out)


def load_session(engine: Engine, session_id: int) -> LiveSession:
    """The session with its instance, dataset and messages, as plain data."""
    with DB(engine) as db:
        s = db.get(Session, session_id)
        if s is None:
            raise LiveError(f"session {session_id} does not exist")
        run = db.get(Run, s.run_id)
        exp = db.get(Experiment, run.experiment_id) if run is not None else None
        inst = db.get(Instance, s.instance_id)
        ds = db.get(Dataset, inst.dataset_id) if inst is not None else None
        if run is None or exp is None or inst is None or ds is None:
            raise LiveError(f"session {session_id} is incomplete in the database")
        who = db.get(Annotator, s.annotator_id) if s.annotator_id is not None else None
        image_meta: dict[str, Any] = {}
        if inst.asset_sha256:
            row = db.exec(select(Asset.mime, Asset.width, Asset.height, Asset.meta)
                          .where(Asset.sha256 == inst.asset_sha256)).first()
            if row is not None:
                image_meta = {"mime": row[0], "width": row[1], "height": row[2], **(row[3] or {})}
        msgs = session_msgs(db, session_id=session_id)
        synthetic = bool(ds.synthetic or (inst.meta or {}).get("synthetic"))
        kind, labels = dataset_task(db, ds)
        return LiveSession(
            id=session_id, experiment_id=exp.id or 0, experiment=exp.name, ordinal=s.ordinal,
            instances=len(run.instance_order), instance_id=inst.id or 0, instance_key=inst.key,
            task=ds.task, match_kind=kind, dataset=ds.name,
            synthetic=synthetic, payload=inst.payload, asset_sha256=inst.asset_sha256,
            image_meta=image_meta, meta=dict(inst.meta or {}),
            labels=labels,
            n=s.n, k=s.k, status=s.status, stop_reason=s.stop_reason, abort_reason=s.abort_reason,
            machine=str(exp.config.get("machine", "simulated")),
            annotator=who.name if who is not None else None, messages=msgs,
        )


# --- the machine agent and the two steps -----------------------------------------------------


def machine_for(engine: Engine, experiment_id: int) -> Agent:
    """The machine agent the live experiment's config names (simulated or provider:model).

    Built through pxp.running.factory, exactly as a controlled run builds it.
    """
    from pxp.running.factory import make_agents

    with DB(engine) as db:
        exp, run = _live_run(db, experiment_id)
        db.expunge_all()
    proxy_cfg = {**exp.config, "human": "proxy"}
    as_controlled = Experiment(id=exp.id, name=exp.name, task=exp.task, mode="live", n=exp.n,
                               k=exp.k, config=proxy_cfg)
    try:
        agents = make_agents(engine, as_controlled, run)
    except (ValueError, RunError) as err:
        raise LiveError(str(err)) from None
    return agents[Sender.MACHINE]


def machine_step(engine: Engine, session_id: int, machine: Agent) -> StepResult | None:
    """The machine's message if it is the machine's turn; None if it is not (any more).

    AgentUnavailable propagates (nothing written) so the page can offer a retry.
    """
    s = load_session(engine, session_id)
    if s.turn is not Sender.MACHINE:
        return None
    try:
        return step(engine, session_id, {Sender.MACHINE: machine, Sender.HUMAN: _NotYourTurn()})
    except (StepConflict, SessionClosed):
        return None


SubmitStatus = Literal["sent", "already", "refused", "closed"]


@dataclass(frozen=True)
class SubmitOutcome:
    """What happened to a submission of the human's message j."""

    status: SubmitStatus
    message: str
    result: StepResult | None = None


def submit_human(
    engine: Engine, session_id: int, *, j: int, answer: Answer, facts: Facts,
) -> SubmitOutcome:
    """Store the human's message j exactly once.

    `j` is the message number the form was rendered for (the submission token): if the
    session has moved on (a double click, a second tab, a rerun) nothing is written.
    """
    s = load_session(engine, session_id)
    if s.status != "open":
        return SubmitOutcome("closed", f"this session is {s.status}")
    if s.j != j or s.turn is not Sender.HUMAN:
        return SubmitOutcome("already", f"message {j} was already sent")
    human = BrowserHuman(answer, facts, match_kind=s.match_kind)
    # if another submission stored message j in the meantime, the engine finds it is the
    # machine's turn: that is the same conflict, and nothing is written
    agents: dict[Sender, Agent] = {Sender.HUMAN: human, Sender.MACHINE: _NotYourTurn()}
    try:
        result = step(engine, session_id, agents)
    except StepConflict:
        return SubmitOutcome("already", f"message {j} was already sent")
    except (TagRefused, ProtocolError) as err:
        return SubmitOutcome("refused", str(err))
    except SessionClosed as err:
        return SubmitOutcome("closed", str(err))
    _touch(engine, session_id)
    audit.record(engine, "answered", session_id=session_id, j=j, detail=result.message.tag.value)
    return SubmitOutcome("sent", f"message {j} sent as {result.message.tag.value}", result)


class _NotYourTurn(BrowserHuman):
    """Stands in for the other agent during a step: finding it is its turn means another
    process took the step we meant to take (a conflict; nothing is written)."""

    def __init__(self) -> None:
        super().__init__(Answer("", ""), Facts(False, False, False))

    def ask(self, q: Query) -> Answer:
        raise StepConflict(f"message {q.j - 1} of session {q.session_id} was already stored")


def _touch(engine: Engine, session_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(Session).where(Session.id == session_id)  # type: ignore[arg-type]
            .values(updated_at=utcnow())
        )


def seed_messages(engine: Engine, session_id: int, messages: Sequence[Msg]) -> None:
    """Store given messages verbatim (tests and demos of a known transcript)."""
    now = utcnow()
    with engine.begin() as conn:
        for m in messages:
            conn.execute(insert(Message).values(
                session_id=session_id, j=m.j, sender=m.sender.value, receiver=m.sender.other.value,
                tag=m.tag.value, prediction=m.prediction, explanation=m.explanation,
                match=m.match, agree=m.agree, changed=m.changed, created_at=now,
            ))


__all__ = [
    "SIMULATED_NAME",
    "AbandonedSession",
    "LiveError",
    "LiveExperimentInfo",
    "LiveSession",
    "SubmitOutcome",
    "abandoned_sessions",
    "claim_next",
    "create_live_experiment",
    "ensure_annotator",
    "live_experiments",
    "load_session",
    "machine_for",
    "machine_name",
    "machine_step",
    "seed_messages",
    "submit_human",
    "take_over",
]
