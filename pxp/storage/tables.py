"""SQLModel tables of DESIGN §4: the blackboard Δ = {D, M, C} and what surrounds it.

Session is the D table, Message the M table, Context the C table. Every change to
these classes needs an Alembic migration in pxp/storage/migrations/versions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel
from sqlmodel._compat import SQLModelConfig

from pxp.storage.identity import IDENTITY
from pxp.storage.times import utcnow as utcnow  # (its home: the Core copy needs it without SQLModel)


class Row(SQLModel):
    """Every table class's base: pydantic builds a validator when first used (docs/development.md, "Start-up")."""

    model_config = SQLModelConfig(defer_build=True)


class Asset(Row, table=True):
    """Content-addressed image bytes (sha256), stored once and shared by instances."""

    sha256: str = Field(primary_key=True, max_length=64)
    mime: str = Field(max_length=64)
    width: int = 0
    height: int = 0
    size: int = 0
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    meta: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)


class Dataset(Row, table=True):
    """A named collection of instances for one task (rad, drug or a custom task)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    identity: str | None = Field(default=None, index=True, unique=True, max_length=1000, sa_column_kwargs=IDENTITY)
    task: str = Field(max_length=64)
    description: str = Field(default="", sa_type=Text)
    source: str = Field(default="", max_length=500)
    synthetic: bool = False
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)


class Instance(Row, table=True):
    """A data instance x: its payload (image asset or SMILES/text) and reference answer."""

    __table_args__ = (UniqueConstraint("dataset_id", "key", name="uq_instance_dataset_key"),)

    id: int | None = Field(default=None, primary_key=True)
    #: indexed by the unique (dataset_id, key) index, which leads with it; split is not indexed (three values)
    dataset_id: int = Field(foreign_key="dataset.id")
    key: str = Field(max_length=300)
    ordinal: int = 0
    split: str | None = Field(default=None, max_length=16)
    asset_sha256: str | None = Field(default=None, foreign_key="asset.sha256", max_length=64)
    payload: str = Field(default="", sa_type=Text)
    label: str = Field(default="", max_length=200)
    reference_prediction: str = Field(default="", sa_type=Text)
    reference_explanation: str = Field(default="", sa_type=Text)
    meta: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class Annotator(Row, table=True):
    """A human agent working in the browser (or an imported human id such as h1)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    role: str = Field(default="", max_length=100)
    created_at: datetime = Field(default_factory=utcnow)


class Experiment(Row, table=True):
    """A controlled or live experiment with its full configuration."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    identity: str | None = Field(default=None, index=True, unique=True, max_length=1000, sa_column_kwargs=IDENTITY)
    task: str = Field(max_length=64)
    mode: str = Field(default="controlled", max_length=16)
    status: str = Field(default="created", max_length=16)
    n: int = 10
    k: int = 3
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    #: the background worker running it ("host:pid") and its last heartbeat (pxp.running.workers.pool)
    worker: str | None = Field(default=None, max_length=200)
    heartbeat_at: datetime | None = None


class Run(Row, table=True):
    """One repetition r of an experiment."""

    __table_args__ = (UniqueConstraint("experiment_id", "repetition", name="uq_run_rep"),)

    id: int | None = Field(default=None, primary_key=True)
    experiment_id: int = Field(foreign_key="experiment.id", index=True)
    repetition: int = 1
    seed: int = 0
    status: str = Field(default="created", max_length=16)
    instance_order: list[int] = Field(default_factory=list, sa_type=JSON)
    #: why the run is paused (a transient API failure, an interruption); None otherwise
    note: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Session(Row, table=True):
    """The D table: a session s on instance x within a run.

    status is open, finished or aborted; stop_reason is ratified, rejected or bound.
    context_kept records the LEARN decision after the session (None until made).
    """

    __table_args__ = (
        UniqueConstraint("run_id", "ordinal", name="uq_session_run_ordinal"),
        Index("ix_session_status", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    instance_id: int = Field(foreign_key="instance.id", index=True)
    ordinal: int = 0
    n: int = 10
    k: int = 3
    status: str = Field(default="open", max_length=16)
    stop_reason: str | None = Field(default=None, max_length=32)
    abort_reason: str | None = Field(default=None, sa_type=Text)
    annotator_id: int | None = Field(default=None, foreign_key="annotator.id", index=True)
    context_kept: bool | None = None
    learn_note: str | None = Field(default=None, sa_type=Text)
    #: LEARN's validation accuracy with the carried context before / after adding this session
    learn_val_before: float | None = None
    learn_val_after: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Claim(Row, table=True):
    """Who was served which case of a live run (docs/research.md, Live experiments and overlap), one row per annotator
    and case.

    The unique (run_id, instance_id, annotator_id) key makes sure nobody is served the same
    case twice, on SQLite and PostgreSQL alike; a take-over adds the new annotator's row and
    keeps the first one, so the table also records who saw what.
    """

    __tablename__ = "live_claim"
    __table_args__ = (UniqueConstraint("run_id", "instance_id", "annotator_id", name="uq_claim_annotator_case"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id")
    instance_id: int = Field(foreign_key="instance.id")
    annotator_id: int = Field(foreign_key="annotator.id", index=True)
    session_id: int = Field(foreign_key="session.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)


class CallId(Row):
    """Which call: provider, model, purpose (ask | agree | eval) and attempt (DESIGN §5)."""

    provider: str = Field(max_length=64)
    model: str = Field(max_length=200)
    purpose: str = Field(max_length=16)
    attempt: int = 1


class CallCost(CallId):
    """The accounting of one LLM (or simulated) call: the one declaration of the call-cost fields,
    shared by LLMCall rows and the agents' CallRecord (pxp.agents.base)."""

    #: None when the server reported no usage: unknown, never zero (docs/research.md, Local models)
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_ms: float = 0.0
    cost_usd: float | None = None
    error: str | None = Field(default=None, sa_type=Text)


class LLMCall(CallCost, table=True):
    """One call to an LLM (or the simulated agent): accounting and errors."""

    id: int | None = Field(default=None, primary_key=True)
    experiment_id: int | None = Field(default=None, foreign_key="experiment.id", index=True)
    run_id: int | None = Field(default=None, foreign_key="run.id", index=True)
    session_id: int | None = Field(default=None, foreign_key="session.id", index=True)
    j: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    #: the model's reasoning beside its answer, bounded (docs/research.md, Local models)
    thinking: str | None = Field(default=None, sa_type=Text)
    #: what was done to fit the call (image size sent, context shortened), as JSON
    detail: dict[str, Any] | None = Field(default=None, sa_type=JSON)


class PendingCall(CallId, table=True):
    """An LLM call sent and not yet stored as an LLMCall: after a crash, its outcome is unknown
    (docs/operations.md, Workers: calls in flight). Written when the call is sent, removed with the LLMCall row that
    completes it."""

    __tablename__ = "llmcall_pending"

    id: int | None = Field(default=None, primary_key=True)
    experiment_id: int | None = Field(default=None, index=True)
    run_id: int | None = None
    session_id: int | None = None
    j: int | None = None
    sent_at: datetime = Field(default_factory=utcnow)


class Message(Row, table=True):
    """The M table: message j of session s, (tag, prediction, explanation) and its facts."""

    __table_args__ = (
        # covering: Table 1 / Figure 1 aggregate (sender, tag) per session without row look-ups. On PostgreSQL the
        # unique index carries them (INCLUDE); SQLite has no INCLUDE, so there a second index covers them, and the
        # Sessions page's tag filter uses ix_message_tag (PostgreSQL's planner prefers the unique index; each index
        # costs every imported message: docs/development.md "Imports at dataset scale")
        UniqueConstraint("session_id", "j", name="uq_message_session_j", postgresql_include=["sender", "tag"]),
        Index("ix_message_tag", "tag").ddl_if(dialect="sqlite"),
        Index("ix_message_session_tags", "session_id", "j", "sender", "tag").ddl_if(dialect="sqlite"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="session.id")
    j: int
    sender: str = Field(max_length=8)
    receiver: str = Field(max_length=8)
    tag: str = Field(max_length=8)
    prediction: str = Field(default="", sa_type=Text)
    explanation: str = Field(default="", sa_type=Text)
    match: bool | None = None
    agree: bool | None = None
    changed: bool | None = None
    llm_call_id: int | None = Field(default=None, foreign_key="llmcall.id")
    created_at: datetime = Field(default_factory=utcnow)


class Context(Row, table=True):
    """The C table: the context C_j after message j of session s."""

    __table_args__ = (UniqueConstraint("session_id", "j", name="uq_context_session_j"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="session.id")
    j: int
    content: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class Probe(Row, table=True):
    """A common-ground probe after human message j (docs/research.md, Common-ground probe): the machine's private
    yes/no answer.

    `question` is a key of pxp.protocols.pxp.common_ground.QUESTIONS; `truth` is what the stored
    session decides; `answer` is None and `valid` false when no reply could be parsed.
    """

    __table_args__ = (UniqueConstraint("session_id", "j", "question", name="uq_probe_session_j_question"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="session.id", index=True)
    j: int
    question: str = Field(max_length=32)
    truth: bool
    answer: bool | None = None
    valid: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class SessionAttempt(Row, table=True):
    """An earlier attempt at a session, kept for the record when the session is run again from its
    start (a run paused because its sessions aborted for format, then resumed: DESIGN §1 "Format
    failures"). `messages` are the attempt's M rows as they were; its LLM calls stay in llmcall."""

    __tablename__ = "session_attempt"
    __table_args__ = (UniqueConstraint("session_id", "attempt", name="uq_session_attempt"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="session.id", index=True)
    attempt: int = 1
    status: str = Field(default="aborted", max_length=16)
    abort_reason: str | None = Field(default=None, sa_type=Text)
    messages: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)


class Draft(Row, table=True):
    """A half-typed reply of an annotator in a session (README "Annotate": nothing lost on
    reload): the form's fields for message j, not a message; deleted when the message is sent."""

    __table_args__ = (UniqueConstraint("annotator_id", "session_id", name="uq_draft_annotator_session"),)

    id: int | None = Field(default=None, primary_key=True)
    annotator_id: int = Field(foreign_key="annotator.id")
    session_id: int = Field(foreign_key="session.id", index=True)
    j: int
    content: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    updated_at: datetime = Field(default_factory=utcnow)


class Evaluation(Row, table=True):
    """Machine performance on a split after a session (0 = at the start)."""

    __table_args__ = (UniqueConstraint("run_id", "after_session", "split", name="uq_evaluation_point"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    after_session: int = 0
    split: str = Field(default="test", max_length=16)
    prediction_accuracy: float = 0.0
    explanation_accuracy: float = 0.0
    both_accuracy: float = 0.0
    instances: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class AppSetting(Row, table=True):
    """App preferences shared by every replica (provider/model per role, default n, k).

    Never holds API keys: those stay in the environment or Streamlit secrets.
    """

    key: str = Field(primary_key=True, max_length=100)
    value: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    updated_at: datetime = Field(default_factory=utcnow)


class TeamMember(Row, table=True):
    """Who may use the app when login is on (docs/operations.md, Login and roles): an email, or a group claim of the
    login provider, mapped to a role (annotator, researcher or admin)."""

    __tablename__ = "team_member"
    __table_args__ = (UniqueConstraint("kind", "name", name="uq_team_member_kind_name"),
                      Index("ix_team_member_kind_identity", "kind", "identity", unique=True))

    id: int | None = Field(default=None, primary_key=True)
    #: "email" or "group"
    kind: str = Field(default="email", max_length=8)
    #: the email (stored lower-case) or the group name
    name: str = Field(max_length=320)
    identity: str | None = Field(default=None, max_length=1000, sa_column_kwargs=IDENTITY)
    role: str = Field(max_length=16)
    added_by: str = Field(default="", max_length=320)
    created_at: datetime = Field(default_factory=utcnow)


class LoginEnd(Row, table=True):
    """When each user last logged out (docs/operations.md "Login and roles"): a login cookie issued before it
    is refused, so cookies copied before a logout give no access afterwards."""

    __tablename__ = "login_end"

    #: the login email, lower-case
    email: str = Field(primary_key=True, max_length=320)
    ended_at: datetime = Field(default_factory=utcnow)
    #: the issue time (seconds since the epoch) of the login that was ended
    ended_iat: int = 0


class AuditEvent(Row, table=True):
    """Who did what to which session, when (docs/operations.md, Login and roles): opened, answered, took over,
    abandoned."""

    __tablename__ = "audit_event"
    __table_args__ = (Index("ix_audit_event_at", "at"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    #: the annotator's name (the login email when login is on)
    actor: str = Field(default="", max_length=320)
    annotator_id: int | None = Field(default=None, index=True)
    action: str = Field(max_length=32)
    session_id: int | None = Field(default=None, index=True)
    j: int | None = None
    detail: str = Field(default="", sa_type=Text)


ALL_TABLES = (AppSetting, Asset, Dataset, Instance, Annotator, Experiment, Run, Session, Claim, LLMCall, Message,
              Context, Evaluation, TeamMember, AuditEvent, Probe, LoginEnd)
