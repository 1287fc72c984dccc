"""The provider interface: one call to an LLM, provider-neutral (DESIGN §5).

A `Prompt` is a system text and alternating turns of text and image parts; parts
marked `cache=True` end a stable prefix (Anthropic puts `cache_control` there, the
OpenAI API caches prefixes on its own). A provider returns a `Completion` with the
text, the structured answer when it used the provider's structured output, and the
accounting of the call. An API error that survives the SDK's own retries is an
`LLMError` with one line for the user.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pxp.protocols.errors import PxpError
from pxp.protocols.settings import value as setting

Role = Literal["user", "assistant"]


class LLMError(PxpError, RuntimeError):
    """An API call failed after the SDK's retries (auth, rate limit, 5xx, timeout)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextExceeded(LLMError):
    """The prompt does not fit the model's context window (each engine's wording, pxp.llm.local)."""


class LLMConfigError(PxpError, ValueError):
    """A provider spec or setting that cannot work (unknown provider, missing key)."""


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    cache: bool = False
    #: what the text renders, when it is stored elsewhere (e.g. a carried session's id)
    ref: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ImagePart:
    """Image bytes already prepared for the provider (see pxp.llm.images)."""

    data: bytes
    media_type: str
    sha256: str | None = None
    width: int = 0
    height: int = 0
    cache: bool = False
    #: the size of the image it was made from (width, height), when it was downscaled
    source: tuple[int, int] | None = None


Part = TextPart | ImagePart


@dataclass(slots=True)
class Turn:
    role: Role
    parts: list[Part]

    def text(self) -> str:
        return "\n\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(slots=True)
class Prompt:
    """ASSEMBLE_PROMPT's result: the system prompt and the conversation so far."""

    system: str
    turns: list[Turn] = field(default_factory=list)
    #: cache the system prompt itself (it is stable across every call of a role)
    cache_system: bool = True

    def snapshot(self) -> dict[str, Any]:
        """A JSON-serialisable copy for the C table: images by sha256, never bytes, and
        carried sessions by id (their messages are in the M table)."""
        turns = []
        for t in self.turns:
            parts: list[dict[str, Any]] = []
            for p in t.parts:
                if isinstance(p, TextPart) and p.ref is not None:
                    parts.append({"type": "ref", **p.ref})
                elif isinstance(p, TextPart):
                    parts.append({"type": "text", "text": p.text})
                else:
                    parts.append({"type": "image", "sha256": p.sha256, "media_type": p.media_type,
                                  "width": p.width, "height": p.height})
            turns.append({"role": t.role, "parts": parts})
        return {"system": self.system, "turns": turns}


#: sees a streamed reply so far (its text, or the JSON of its structured answer) after each piece
TextSink = Callable[[str], None]
_SINK: ContextVar[TextSink | None] = ContextVar("pxp_text_sink", default=None)


@contextmanager
def streaming(sink: TextSink) -> Iterator[None]:
    """Within this block, the machine's answers in this thread are streamed to `sink` (the app shows
    them as they are generated); what is stored is the same as without it."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def text_sink() -> TextSink | None:
    """The sink of the enclosing `streaming` block, if any."""
    return _SINK.get()


@dataclass(frozen=True, slots=True)
class Schema:
    """A JSON schema for the provider's structured output (tool / response_format)."""

    name: str
    description: str
    schema: Mapping[str, Any]


@dataclass(slots=True)
class Completion:
    """What one call returned, with its accounting."""

    text: str
    data: dict[str, Any] | None = None
    #: None when the server sent no usage (unknown, never zero)
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_ms: float = 0.0
    cost_usd: float | None = None
    stop_reason: str | None = None
    #: the model's reasoning beside its answer (pxp.llm.local), bounded; never parsed as the answer
    thinking: str | None = None


#: the smallest bound on a reply's size; DESIGN §1 "Format failures"
REPLY_BOUND_MIN = 64 * 1024
#: bytes allowed per requested output token (a token is about 4 bytes of text: a few times that)
REPLY_BYTES_PER_TOKEN = 16


#: what reading a reply of the wrong shape raises, in the SDK's own parsing too (RecursionError: JSON nested
#: too deeply for Python to read): a bad reply, said in one line, never a trace
MALFORMED: tuple[type[Exception], ...] = (ValueError, TypeError, AttributeError, KeyError, RecursionError)


def cut_off(provider: str, model: str, problem: str) -> str:
    """One line for a streamed reply that ended before it was complete (a provider fault)."""
    return (f"{provider}:{model}: the streamed reply was cut off before its end ({problem[:120]}); "
            "nothing was stored and the session can be resumed")


def reply_bound(max_tokens: int) -> int:
    """The largest reply (in bytes) pxp reads as an answer: a few times the requested max tokens,
    never below 64 KiB. A longer reply is a format failure and is never stored whole."""
    return max(REPLY_BOUND_MIN, REPLY_BYTES_PER_TOKEN * max(0, max_tokens))


def reply_size(out: Completion) -> int:
    """The reply's size in bytes: its text and its structured answer (as JSON)."""
    size = len(out.text.encode("utf-8", "replace"))
    if out.data is not None:
        size += len(json.dumps(out.data, default=str).encode("utf-8", "replace"))
    return size


def excerpt(text: str, limit: int = 120) -> str:
    """The first `limit` characters of a reply on one line, marked when cut."""
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit and len(text) <= limit * 4 else flat[:limit] + "… [truncated]"


@dataclass(frozen=True, slots=True)
class ProviderOptions:
    """SDK settings: base URL, retries and timeout (None = the SDK's default), and the largest image edge the
    model takes (`max_image_px`, None = the provider's own limit; docs/research.md, Local models)."""

    base_url: str | None = None
    max_retries: int | None = None
    timeout: float | None = None
    max_image_px: int | None = None
    #: tokens a Claude model may think before it answers (extended thinking; None: not asked to think)
    thinking_budget: int | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """The SDK client arguments these options set (both SDKs take the same names)."""
        kwargs: dict[str, Any] = {}
        if self.base_url:
            kwargs["base_url"] = self.base_url
        if self.max_retries is not None:
            kwargs["max_retries"] = self.max_retries
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        return kwargs

    @classmethod
    def from_env(cls, base_url: str | None = None, extra: Mapping[str, Any] | None = None) -> ProviderOptions:
        """From a run's `extra` settings, else PXP_LLM_MAX_RETRIES / PXP_LLM_TIMEOUT / PXP_MAX_IMAGE_PX /
        PXP_THINKING_BUDGET (checked by their declaration, pxp.protocols.settings)."""
        extra = extra or {}

        def pick(key: str, env: str, kind: Callable[[Any], Any]) -> Any:
            given = extra.get(key)
            if given in (None, ""):
                return setting(env)
            try:
                return kind(given)
            except (TypeError, ValueError):
                raise LLMConfigError(f"{key} must be a number (got {given!r})") from None

        out = cls(
            base_url=base_url or None,
            max_retries=pick("max_retries", "PXP_LLM_MAX_RETRIES", int),
            timeout=pick("timeout", "PXP_LLM_TIMEOUT", float),
            max_image_px=pick("max_image_px", "PXP_MAX_IMAGE_PX", int),
            thinking_budget=pick("thinking_budget", "PXP_THINKING_BUDGET", int) or None,
        )
        if out.thinking_budget is not None and out.thinking_budget < 1024:
            raise LLMConfigError(f"thinking_budget must be at least 1024 tokens, the API's least (got "
                                 f"{out.thinking_budget})")
        if out.max_image_px is not None and out.max_image_px < 16:
            raise LLMConfigError(f"max_image_px must be at least 16 pixels (got {out.max_image_px})")
        return out


class Provider(Protocol):
    """One LLM behind an SDK: `name` is the provider, `model` the model id."""

    name: str
    model: str

    def complete(
        self,
        prompt: Prompt,
        *,
        max_tokens: int,
        temperature: float | None = None,
        schema: Schema | None = None,
        on_text: TextSink | None = None,
    ) -> Completion:
        """Send the prompt; raise LLMError when the call fails after the SDK's retries.

        With `on_text` the reply is streamed and `on_text` sees the reply so far after each piece;
        the Completion is the same as without it. A stream cut off half-way is an LLMError."""
        ...


def parse_spec(spec: str) -> tuple[str, str]:
    """'anthropic:claude-sonnet-4-6' -> ('anthropic', 'claude-sonnet-4-6')."""
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or not provider or not model:
        raise LLMConfigError(
            f"{spec!r} is not a provider:model spec (e.g. anthropic:claude-sonnet-4-6, openai:gpt-4.1)"
        )
    return provider, model


PROVIDERS = ("anthropic", "openai")


def is_llm_spec(spec: str) -> bool:
    """Whether `spec` names a provider:model (rather than simulated / lexical)."""
    return spec.partition(":")[0].strip().lower() in PROVIDERS and ":" in spec
