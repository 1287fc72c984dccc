"""`anthropic:<model>` through the official `anthropic` SDK (Messages API).

Images go as base64 image blocks; every part marked `cache=True` (the end of a
stable prefix) and the system prompt carry `cache_control: ephemeral`, so a growing
context is read from the prompt cache. Structured output: a forced tool
(`tool_choice: {type: tool}`) whose input schema is the answer's. Retries and
timeouts are the SDK's own (`max_retries`, `timeout`); a 429 that survives them lowers
this endpoint's in-flight limit (pxp.llm.limits) before it pauses anything.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import anthropic
import httpx
from anthropic.types import Message

from pxp.llm.base import (
    MALFORMED,
    Completion,
    ImagePart,
    LLMConfigError,
    LLMError,
    Prompt,
    ProviderOptions,
    Schema,
    TextPart,
    TextSink,
    cut_off,
)
from pxp.llm.errors import api_error, bad_reply
from pxp.llm.keys import api_key
from pxp.llm.limits import is_rate_limited, provider_limit
from pxp.llm.local import answer_so_far, kept_thinking, prompt_tokens, split_thinking
from pxp.llm.pricing import cost_usd
from pxp.llm.redact import redact, redact_data

CACHE = {"type": "ephemeral"}
#: Anthropic allows at most four cache breakpoints per request.
MAX_BREAKPOINTS = 4


#: what a streamed reply that ends badly raises: the SDK's and the connection's errors, or a bad shape
_CUT: tuple[type[Exception], ...] = (anthropic.AnthropicError, httpx.HTTPError, *MALFORMED)


class AnthropicProvider:
    """The Messages API of Anthropic (or any server speaking its wire format)."""

    name = "anthropic"

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.options = options or ProviderOptions()
        kwargs: dict[str, Any] = {}
        key = api_key("ANTHROPIC_API_KEY")
        if key:
            kwargs["api_key"] = key
        elif not (api_key("ANTHROPIC_AUTH_TOKEN") or api_key("ANTHROPIC_PROFILE")):
            raise LLMConfigError(
                "anthropic: no API key; set ANTHROPIC_API_KEY in the environment or Streamlit secrets"
            )
        kwargs.update(self.options.client_kwargs())
        try:
            self.client = anthropic.Anthropic(**kwargs)
        except anthropic.AnthropicError as e:
            raise LLMConfigError(f"anthropic: {e}") from None
        #: the adaptive in-flight limit this provider's calls share (pxp.llm.limits; one per endpoint)
        self.limit_key = f"{self.name}@{self.client.base_url}"

    # -- request ----------------------------------------------------------------------
    def request(
        self, prompt: Prompt, *, max_tokens: int, temperature: float | None, schema: Schema | None
    ) -> dict[str, Any]:
        """The Messages API request body for a prompt (also used by tests)."""
        breakpoints = 0
        system: list[dict[str, Any]] = [{"type": "text", "text": prompt.system}]
        if prompt.cache_system:
            system[0]["cache_control"] = CACHE
            breakpoints += 1
        cached = [p for t in prompt.turns for p in t.parts if p.cache]
        # keep the last breakpoints when there are too many (the longest prefixes)
        keep = set(map(id, cached[max(0, len(cached) - (MAX_BREAKPOINTS - breakpoints)):]))
        messages: list[dict[str, Any]] = []
        for turn in prompt.turns:
            content: list[dict[str, Any]] = []
            for part in turn.parts:
                if isinstance(part, TextPart):
                    block: dict[str, Any] = {"type": "text", "text": part.text}
                else:
                    block = _image_block(part)
                if part.cache and id(part) in keep:
                    block["cache_control"] = CACHE
                content.append(block)
            messages.append({"role": turn.role, "content": content})
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": max_tokens, "system": system, "messages": messages,
        }
        if schema is not None:
            body["tools"] = [{"name": schema.name, "description": schema.description,
                              "input_schema": dict(schema.schema)}]
            body["tool_choice"] = {"type": "tool", "name": schema.name}
        budget = self.options.thinking_budget
        if budget:  # asked to think (docs/research.md, Local models): the answer follows the thinking blocks
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max_tokens + budget  # the budget counts within max_tokens
            if schema is not None:  # a forced tool is refused with thinking: the tool is offered, not forced
                body["tool_choice"] = {"type": "auto"}
            return body  # and temperature must stay the API's own with thinking
        if temperature is not None:
            # the SDK no longer types `temperature`; the API still accepts it
            body["extra_body"] = {"temperature": temperature}
        return body

    def complete(
        self, prompt: Prompt, *, max_tokens: int, temperature: float | None = None,
        schema: Schema | None = None, on_text: TextSink | None = None,
    ) -> Completion:
        body = self.request(prompt, max_tokens=max_tokens, temperature=temperature, schema=schema)
        if on_text is not None:
            return self._streamed(body, schema, on_text)
        t0 = time.perf_counter()

        def send() -> Any:
            nonlocal t0
            t0 = time.perf_counter()  # the latency of the call that answered, not of waiting for a slot
            return self.client.messages.with_raw_response.create(**body)

        try:
            raw = provider_limit(self.limit_key).call(send, is_rate_limited)
        except anthropic.AnthropicError as e:
            raise api_error(self.name, self.model, e, self.options, prompt_tokens(body)) from None
        try:
            msg = raw.parse()
            return self._completion(msg, schema, (time.perf_counter() - t0) * 1000)
        except MALFORMED as e:
            raise LLMError(bad_reply(self.name, self.model, raw, self.options, str(e)),
                           status=raw.status_code) from None

    def _streamed(self, body: dict[str, Any], schema: Schema | None, on_text: TextSink) -> Completion:
        """The same call streamed (the SDK's messages.stream): `on_text` sees the text, or the tool
        call's JSON, so far; the final message is read exactly as an unstreamed one."""
        t0 = time.perf_counter()
        so_far: list[str] = []
        try:
            with provider_limit(self.limit_key).call(lambda: self.client.messages.stream(**body),
                                                     is_rate_limited) as stream:
                for event in stream:
                    if event.type == "content_block_delta":
                        piece = getattr(event.delta, "text", None) or getattr(event.delta, "partial_json", None)
                        if piece:
                            so_far.append(piece)
                            shown = answer_so_far("".join(so_far))
                            if shown:  # nothing is shown while the model is still thinking
                                on_text(redact(shown))
                msg = stream.get_final_message()
        except (anthropic.APIStatusError, anthropic.APITimeoutError) as e:  # a timeout is said as one, not a cut
            raise api_error(self.name, self.model, e, self.options, prompt_tokens(body)) from None
        except _CUT as e:
            raise LLMError(cut_off(self.name, self.model, f"{type(e).__name__}: {e}")) from None
        if msg.stop_reason is None:
            raise LLMError(cut_off(self.name, self.model, "no stop reason"))
        try:
            return self._completion(msg, schema, (time.perf_counter() - t0) * 1000)
        except MALFORMED as e:
            raise LLMError(cut_off(self.name, self.model, str(e))) from None

    def _completion(self, msg: Any, schema: Schema | None, latency: float) -> Completion:
        """A Message as pxp's Completion; TypeError (and kin) for a reply of the wrong shape."""
        if not isinstance(msg, Message):
            raise TypeError(f"not a message ({type(msg).__name__})")
        if not isinstance(msg.content, list | None) or msg.usage is None:
            raise TypeError("no list of content blocks, or no usage")
        text_parts: list[str] = []
        thinking: list[str] = []
        data: dict[str, Any] | None = None
        for block in msg.content or ():  # null content is an empty answer (a format failure)
            if block.type == "thinking":  # extended thinking: kept apart, never the answer
                thinking.append(redact(str(block.thinking or "")))
            elif block.type == "redacted_thinking":
                thinking.append("(redacted by the provider)")
            elif block.type == "text":
                if not isinstance(block.text, str):
                    raise TypeError("a text block without text")
                text_parts.append(redact(block.text))
            elif block.type == "tool_use" and schema is not None and block.name == schema.name:
                if isinstance(block.input, dict):
                    data = redact_data(dict(block.input))
                else:  # the tool input is not an object: its JSON is the (unusable) answer
                    text_parts.append(redact(json.dumps(block.input)))
        u = msg.usage
        tokens_in, tokens_out = u.input_tokens or 0, u.output_tokens or 0
        cache_read = u.cache_read_input_tokens or 0
        cache_write = u.cache_creation_input_tokens or 0
        text, inline = split_thinking("".join(text_parts))  # a compatible server's inline <think> block
        return Completion(
            text=text, data=data, tokens_in=tokens_in, tokens_out=tokens_out,
            cache_read=cache_read, cache_write=cache_write, latency_ms=latency,
            cost_usd=cost_usd(self.name, self.model, tokens_in=tokens_in, tokens_out=tokens_out,
                              cache_read=cache_read, cache_write=cache_write),
            stop_reason=msg.stop_reason, thinking=kept_thinking(*thinking, inline),
        )


def _image_block(part: ImagePart) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type,
                   "data": base64.b64encode(part.data).decode("ascii")},
    }
