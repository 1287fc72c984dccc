"""Live turns: the session as the Annotate page sees it, and the two steps (DESIGN §1, §3).

Each human turn is one engine step with a BrowserHuman, then one step of the machine
(simulated or an LLM, built by pxp.running.pxp.factory exactly as a controlled run builds it).
The engine's unique (session_id, j) key makes a repeated submission lose cleanly
(StepConflict), so every step happens exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Connection, Engine, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.agents.base import Agent, Answer, Facts, Query
from pxp.agents.browser import BrowserHuman
from pxp.protocols.pxp.facts import conformance_with_content
from pxp.protocols.pxp.intelligibility import session_flags
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, next_sender
from pxp.running.pxp.config import RunError
from pxp.running.pxp.engine import Guard, SessionClosed, StepConflict, StepResult, TagRefused, step
from pxp.running.pxp.factory import dataset_task, make_agents
from pxp.running.pxp.live.assignment import LiveError, case_number, live_run, machine_name, overlap_of, slot_number
from pxp.storage import audit
from pxp.storage.store import session_msgs
from pxp.storage.tables import Annotator, Asset, Dataset, Experiment, Instance, Run, Session, utcnow
from pxp.tasks.base import content_match, task_match_kind


@dataclass(frozen=True)
class LiveSession:
    """Everything the Annotate page shows about one session (plain data, no ORM)."""

    id: int
    experiment_id: int
    experiment: str
    #: the case's position in the queue (with overlap k, k sessions share it)
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
    #: the annotator slot of the case (1..overlap): with overlap k, k annotators share a case
    slot: int = 1
    overlap: int = 1

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
    def case_label(self) -> str:
        """"case 12", or "case 12 · annotator slot 2" when several annotators share each case."""
        return f"case {self.ordinal}" + (f" · annotator slot {self.slot}" if self.overlap > 1 else "")

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
        return [str(v) for v in conformance_with_content(self.messages, self.n, self.k, status=self.status,
                                                         match=content_match(self.match_kind))]


def _match_kind_and_labels(db: DB, ds: Dataset) -> tuple[str, list[str]]:
    """The dataset's MATCH kind and label set (pxp.running.pxp.factory.dataset_task, the one rule)."""
    try:
        spec = dataset_task(db, ds)
    except ValueError:
        return task_match_kind(ds.task, dict(ds.config or {})), []
    return spec.match_kind, list(spec.labels)


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
        kind, labels = _match_kind_and_labels(db, ds)
        return LiveSession(
            id=session_id, experiment_id=exp.id or 0, experiment=exp.name,
            ordinal=case_number(s.ordinal, overlap_of(exp)),
            instances=len(run.instance_order), instance_id=inst.id or 0, instance_key=inst.key,
            task=ds.task, match_kind=kind, dataset=ds.name,
            synthetic=synthetic, payload=inst.payload, asset_sha256=inst.asset_sha256,
            image_meta=image_meta, meta=dict(inst.meta or {}),
            labels=labels,
            n=s.n, k=s.k, status=s.status, stop_reason=s.stop_reason, abort_reason=s.abort_reason,
            machine=str(exp.config.get("machine", "simulated")),
            annotator=who.name if who is not None else None, messages=msgs,
            slot=slot_number(s.ordinal, overlap_of(exp)), overlap=overlap_of(exp),
        )


# --- the machine agent and the two steps -----------------------------------------------------


def machine_for(engine: Engine, experiment_id: int) -> Agent:
    """The machine agent the live experiment's config names (simulated or provider:model).

    Built through pxp.running.pxp.factory, exactly as a controlled run builds it.
    """
    with DB(engine) as db:
        exp, run = live_run(db, experiment_id)
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
    engine: Engine, session_id: int, *, j: int, answer: Answer, facts: Facts, guard: Guard | None = None,
    view: dict[str, Any] | None = None,
) -> SubmitOutcome:
    """Store the human's message j exactly once.

    `j` is the message number the form was rendered for (the submission token): if the
    session has moved on (a double click, a second tab, a rerun) nothing is written.
    `guard` runs in the write's transaction (engine.step); its refusal (StepRefused) propagates.
    `view` is the image window the expert settled on, stored in the message's context row.
    """
    s = load_session(engine, session_id)
    if s.status != "open":
        return SubmitOutcome("closed", f"this session is {s.status}")
    if s.j != j or s.turn is not Sender.HUMAN:
        return SubmitOutcome("already", f"message {j} was already sent")
    human = BrowserHuman(answer, facts, match_kind=s.match_kind, view=view)
    # if another submission stored message j in the meantime, the engine finds it is the
    # machine's turn: that is the same conflict, and nothing is written
    agents: dict[Sender, Agent] = {Sender.HUMAN: human, Sender.MACHINE: _NotYourTurn()}

    def answered(conn: Connection, msg: Msg) -> None:
        """The answer's audit row and the session's activity time, stored with the message."""
        conn.execute(update(Session).where(col(Session.id) == session_id).values(updated_at=utcnow()))
        audit.write(conn, "answered", session_id=session_id, j=j, detail=msg.tag.value)

    try:
        result = step(engine, session_id, agents, guard=guard, also=answered)
    except StepConflict:
        return SubmitOutcome("already", f"message {j} was already sent")
    except (TagRefused, ProtocolError) as err:
        return SubmitOutcome("refused", str(err))
    except SessionClosed as err:
        return SubmitOutcome("closed", str(err))
    return SubmitOutcome("sent", f"message {j} sent as {result.message.tag.value}", result)


class _NotYourTurn(BrowserHuman):
    """Stands in for the other agent during a step: finding it is its turn means another
    process took the step we meant to take (a conflict; nothing is written)."""

    def __init__(self) -> None:
        super().__init__(Answer("", ""), Facts(False, False, False))

    def ask(self, q: Query) -> Answer:
        raise StepConflict(f"message {q.j - 1} of session {q.session_id} was already stored")
