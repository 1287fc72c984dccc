"""`openai:<model>` through the official `openai` SDK (Chat Completions).

With a base URL (`--base-url` or OPENAI_BASE_URL) this is any OpenAI-compatible
server: Ollama, vLLM, llama.cpp, the private option for hospital data; such servers
need no key. Images go as base64 data URLs. Structured output: `response_format`
of type `json_schema` (strict); a server that refuses it gets the same prompt once
without it and is then asked in text for the rest of the run. Prompt caching is the
API's own automatic prefix caching; cached tokens are counted as cache reads. A 429 that
survives the SDK's retries lowers this endpoint's in-flight limit (pxp.llm.limits) before it
pauses anything.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import time
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion

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
from pxp.llm.local import LOCAL_TIMEOUT, answer_so_far, kept_thinking, prompt_tokens, reasoning_field, split_thinking
from pxp.llm.pricing import cost_usd
from pxp.llm.redact import redact, redact_data

#: the key sent to local OpenAI-compatible servers, which ignore it
LOCAL_KEY = "not-needed"


#: what a streamed reply that ends badly raises: the SDK's and the connection's errors, or a bad shape
_CUT: tuple[type[Exception], ...] = (openai.OpenAIError, httpx.HTTPError, *MALFORMED)


class OpenAIProvider:
    """Chat Completions of OpenAI or an OpenAI-compatible server."""

    name = "openai"

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.options = options or ProviderOptions()
        base_url = self.options.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.local = base_url is not None
        if self.local and self.options.timeout is None:  # the first call may wait for the model to load
            self.options = dataclasses.replace(self.options, timeout=LOCAL_TIMEOUT)
        self.structured = True
        key = api_key("OPENAI_API_KEY")
        if not key:
            if not self.local:
                raise LLMConfigError(
                    "openai: no API key; set OPENAI_API_KEY (or --base-url for a local "
                    "OpenAI-compatible server)"
                )
            key = LOCAL_KEY
        kwargs: dict[str, Any] = {"api_key": key}
        kwargs.update(self.options.client_kwargs())
        try:
            self.client = openai.OpenAI(**kwargs)
        except openai.OpenAIError as e:
            raise LLMConfigError(f"openai: {e}") from None
        #: the adaptive in-flight limit this provider's calls share (pxp.llm.limits; one per endpoint)
        self.limit_key = f"{self.name}@{self.client.base_url}"

    def request(
        self, prompt: Prompt, *, max_tokens: int, temperature: float | None, schema: Schema | None
    ) -> dict[str, Any]:
        """The Chat Completions request body for a prompt (also used by tests)."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}]
        for turn in prompt.turns:
            if turn.role == "assistant" or all(isinstance(p, TextPart) for p in turn.parts):
                # plain strings where no image is needed: every compatible server reads them
                messages.append({"role": turn.role, "content": turn.text()})
                continue
            content: list[dict[str, Any]] = []
            for part in turn.parts:
                if isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
                else:
                    content.append(_image_part(part))
            messages.append({"role": "user", "content": content})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        # local servers know max_tokens; the OpenAI API wants max_completion_tokens
        body["max_tokens" if self.local else "max_completion_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        if schema is not None and self.structured:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "description": schema.description,
                                "schema": dict(schema.schema), "strict": True},
            }
        return body

    def complete(
        self, prompt: Prompt, *, max_tokens: int, temperature: float | None = None,
        schema: Schema | None = None, on_text: TextSink | None = None,
    ) -> Completion:
        body = self.request(prompt, max_tokens=max_tokens, temperature=temperature, schema=schema)
        if on_text is not None:
            return self._streamed(body, on_text)
        t0 = time.perf_counter()
        try:
            try:
                resp = self._create(body)
            except openai.BadRequestError as e:
                if "response_format" not in body or not _refuses_schema(e):
                    raise
                self.structured = False  # this server cannot do json_schema: ask in text
                body.pop("response_format")
                resp = self._create(body)
        except openai.OpenAIError as e:
            raise api_error(self.name, self.model, e, self.options, prompt_tokens(body)) from None
        latency = (time.perf_counter() - t0) * 1000
        text, refusal, stop, reasoning = "", None, None, ""
        if resp.choices:
            choice = resp.choices[0]
            text, refusal, stop = choice.message.content or "", getattr(choice.message, "refusal", None), \
                choice.finish_reason
            reasoning = reasoning_field(choice.message)
        return self._completion(body, text, refusal, stop, resp.usage, latency, reasoning)

    def _streamed(self, body: dict[str, Any], on_text: TextSink) -> Completion:
        """The same call streamed (`stream=True` with the usage in the last chunk): `on_text` sees the
        text so far; the pieces are read into exactly the Completion an unstreamed call gives."""
        t0 = time.perf_counter()
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        parts: list[str] = []
        reasoning: list[str] = []
        refusal: list[str] = []
        stop: str | None = None
        usage: Any = None
        try:
            chunks = provider_limit(self.limit_key).call(
                lambda: self.client.chat.completions.create(**streamed), is_rate_limited)
            for chunk in chunks:
                usage = chunk.usage or usage
                for choice in chunk.choices[:1]:
                    reasoning.append(reasoning_field(choice.delta))
                    if choice.delta.content:
                        parts.append(choice.delta.content)
                        shown = answer_so_far("".join(parts))
                        if shown:  # nothing is shown while the model is still thinking
                            on_text(redact(shown))
                    if getattr(choice.delta, "refusal", None):
                        refusal.append(choice.delta.refusal)
                    stop = choice.finish_reason or stop
        except (openai.APIStatusError, openai.APITimeoutError) as e:  # a timeout is said as one, not as a cut
            raise api_error(self.name, self.model, e, self.options, prompt_tokens(body)) from None
        except _CUT as e:
            raise LLMError(cut_off(self.name, self.model, f"{type(e).__name__}: {e}")) from None
        if stop is None:
            raise LLMError(cut_off(self.name, self.model, "no finish reason"))
        latency = (time.perf_counter() - t0) * 1000
        return self._completion(body, "".join(parts), "".join(refusal) or None, stop, usage, latency,
                                "".join(reasoning))

    def _completion(self, body: dict[str, Any], content: str, refusal: str | None, finish: str | None,
                    u: Any, latency: float, reasoning: str = "") -> Completion:
        """pxp's Completion of a reply's content, refusal, finish reason and usage (streamed or not);
        thinking, inline or in a field of its own, is kept apart from the answer (pxp.llm.local)."""
        content, inline = split_thinking(content or "")
        thinking = kept_thinking(redact(reasoning), redact(inline))
        text = redact(content or refusal or "")
        stop = "refusal" if refusal and not content else finish
        data = None
        if "response_format" in body and text and stop != "refusal":
            try:
                parsed = json.loads(text)
                data = redact_data(parsed) if isinstance(parsed, dict) else None
            except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deeply: the text alone
                data = None
        if u is None:  # a server that counts no tokens: unknown, never zero (docs/research.md)
            return Completion(text=text, data=data, tokens_in=None, tokens_out=None, latency_ms=latency,
                              stop_reason=stop, thinking=thinking)
        details = u.prompt_tokens_details
        cache_read = (details.cached_tokens or 0) if details else 0
        tokens_in = max(0, (u.prompt_tokens or 0) - cache_read)
        tokens_out = u.completion_tokens or 0
        return Completion(
            text=text, data=data, tokens_in=tokens_in, tokens_out=tokens_out,
            cache_read=cache_read, latency_ms=latency, stop_reason=stop, thinking=thinking,
            cost_usd=None if self.local else cost_usd(
                self.name, self.model, tokens_in=tokens_in, tokens_out=tokens_out,
                cache_read=cache_read),
        )

    def _create(self, body: dict[str, Any]) -> ChatCompletion:
        """One Chat Completions call; a reply the SDK cannot read is an LLMError naming what came back."""
        raw = provider_limit(self.limit_key).call(
            lambda: self.client.chat.completions.with_raw_response.create(**body), is_rate_limited)
        try:
            resp = raw.parse()
            if not isinstance(resp, ChatCompletion):
                raise TypeError(f"not a chat completion ({type(resp).__name__})")
            if not isinstance(resp.choices, list):
                raise TypeError("no list of choices")
            for choice in resp.choices[:1]:
                message = getattr(choice, "message", None)
                if message is None or not isinstance(message.content, str | None):
                    raise TypeError("a choice without a message")
        except MALFORMED as e:
            raise LLMError(bad_reply(self.name, self.model, raw, self.options, str(e)),
                           status=raw.status_code) from None
        return resp


def _refuses_schema(e: openai.BadRequestError) -> bool:
    text = str(e).lower()
    return "response_format" in text or "json_schema" in text


def _image_part(part: ImagePart) -> dict[str, Any]:
    url = f"data:{part.media_type};base64,{base64.b64encode(part.data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
