"""The agent interface the engine drives: ASK_AGENT, MATCH_λ and AGREE_λ (Procedure 2).

A machine (LLM or simulated) and a human (database proxy or the browser) are the same
kind of object to the engine; only ask/match/agree differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pxp.llm.redact import accounting
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.storage.tables import CallCost


class AgentError(PxpError, RuntimeError):
    """Base of the errors an agent reports to the engine."""


class FormatFailure(AgentError):
    """The agent's answer could not be parsed after the allowed attempts: abort the session.

    `kind` names what was wrong with the last answer (pxp.tasks.spec.FORMAT_KINDS), `model` who
    answered and `reply` the start of the last answer, so a run can say why it paused.
    """

    def __init__(self, message: str, *, kind: str = "unusable answer", model: str = "", reply: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.model = model
        self.reply = reply


class AgentUnavailable(AgentError):
    """A transient or configuration failure (API error, timeout, missing key).

    The step writes nothing; the session stays open and can be resumed.
    """


class ContextTooLong(AgentUnavailable):
    """The prompt does not fit the model's context window (docs/research.md, Local models): a controlled
    run pauses; a live session's machine first shortens its context."""


@dataclass(frozen=True, slots=True)
class Answer:
    """(y, e): an agent's current prediction and explanation."""

    prediction: str
    explanation: str


@dataclass(frozen=True, slots=True)
class Facts:
    """Guard outcomes an agent supplies itself (the human in the browser).

    When `tag` is given (the chemist picks it directly) the engine checks it against
    the AGENT rule and refuses a forbidden one.
    """

    match: bool
    agree: bool
    changed: bool
    tag: Tag | None = None


class CallRecord(CallCost):
    """Accounting of one LLM (or simulated) call, a plain record the caller stores as an LLMCall row."""

    #: its llmcall_pending row while it is not stored (pxp.running.pxp.journal)
    pending_id: int | None = None
    #: the model's reasoning beside its answer (stored on the LLMCall row, not exported with the accounting)
    thinking: str | None = None
    #: what was done to fit the call: image size sent, context shortened (the LLMCall row's `detail`)
    detail: dict[str, Any] | None = None


#: The accounting fields a CallRecord shares with an LLMCall row (stored and exported alike).
CALL_FIELDS: tuple[str, ...] = tuple(CallCost.model_fields)


def call_fields(c: Any) -> dict[str, Any]:
    """The accounting fields of a CallRecord or an LLMCall row, the error text redacted."""
    return accounting(c, CALL_FIELDS)


@dataclass(frozen=True, slots=True)
class InstanceView:
    """What an agent may see of instance x, including its reference answer.

    Only the human proxy may use the reference; a machine must not.
    """

    id: int
    key: str
    task: str
    payload: str
    label: str
    reference: Answer
    split: str | None = None
    asset_sha256: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    load_image: Callable[[], bytes | None] = field(default=lambda: None, repr=False)


@dataclass(frozen=True, slots=True)
class CarriedSession:
    """An earlier session whose context the machine carries (LEARN kept it)."""

    session_id: int
    instance: InstanceView
    messages: tuple[Msg, ...]


@dataclass(slots=True)
class Query:
    """Everything ASK_AGENT(q, x, λ, C_{j-1}) may use for message j."""

    instance: InstanceView
    sender: Sender
    j: int
    n: int
    k: int
    history: Sequence[Msg]
    carry: Sequence[CarriedSession] = ()
    session_id: int | None = None
    calls: list[CallRecord] = field(default_factory=list)

    @property
    def own_previous(self) -> Msg | None:
        """λ's own message j-2, if any."""
        return self.history[-2] if len(self.history) >= 2 else None

    @property
    def other_last(self) -> Msg | None:
        """The other agent's message j-1, if any."""
        return self.history[-1] if self.history else None


@runtime_checkable
class Agent(Protocol):
    """An agent λ as the engine sees it."""

    #: e.g. "simulated", "proxy", "anthropic:claude-sonnet-4-6", "browser"
    label: str

    def ask(self, q: Query) -> Answer:
        """ASK_AGENT: the agent's current (prediction, explanation) for message q.j."""
        ...

    def match(self, y1: str, y2: str, q: Query) -> bool:
        """MATCH_λ on two predictions."""
        ...

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        """AGREE_λ on two explanations."""
        ...

    def facts(self, q: Query, answer: Answer) -> Facts | None:
        """Guard outcomes the agent supplies itself, or None to compute them."""
        ...

    def context(self, q: Query, answer: Answer, tag: Tag) -> dict[str, Any]:
        """UPDATE_CONTEXT: the C_j snapshot stored with message j."""
        ...


class AgentBase:
    """Defaults shared by agents: computed facts and a compact context snapshot."""

    label = "agent"

    def facts(self, q: Query, answer: Answer) -> Facts | None:
        return None

    def context(self, q: Query, answer: Answer, tag: Tag) -> dict[str, Any]:
        return {
            "agent": self.label,
            "carried_sessions": [c.session_id for c in q.carry],
            "j": q.j,
        }
