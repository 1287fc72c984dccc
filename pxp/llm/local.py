"""What local servers and reasoning models send beside the answer (docs/research.md, Local models).

Reasoning is not the answer: a `<think>…</think>` or `<thinking>…</thinking>` block at the start of
the content (Qwen3, DeepSeek-R1 through Ollama, vLLM, llama.cpp, LM Studio), a closing tag whose
opening one the chat template already sent, or a separate `reasoning_content` / `reasoning` field
is thinking; the answer is what follows the last closing tag. The thinking is kept, bounded and under
the text rule, on the call's record. A "context length exceeded" error is recognised in each
engine's wording. A call still unanswered after `slow_after()` seconds (a local server loading
the model) is shown as waiting for the model to load; local servers' calls time out after
LOCAL_TIMEOUT seconds unless a timeout is set.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any

from pxp.protocols.settings import value as setting
from pxp.protocols.text import TextRefused, clean_text

_OPEN = re.compile(r"\A\s*<(think|thinking|reasoning)>", re.I)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)
#: the fields OpenAI-compatible servers put reasoning in (vLLM, llama.cpp, LM Studio: the first; Ollama: the second)
REASONING_FIELDS = ("reasoning_content", "reasoning")
#: the largest thinking kept on a call's record, in characters (the rest is cut, marked)
THINKING_BOUND = 64 * 1024


def split_thinking(content: str) -> tuple[str, str]:
    """(answer, thinking) of a reply's content: the thinking blocks at its start are not the answer.

    An opening tag at the start without its closing tag (thinking cut off at the token limit) leaves
    no answer at all; a closing tag with no opening tag before it ends thinking whose opening tag
    was in the prompt (DeepSeek-R1's template)."""
    closes = list(_CLOSE.finditer(content))
    opened = _OPEN.match(content)
    if not closes:
        return ("", content[opened.end():].strip()) if opened else (content, "")
    last = closes[-1]
    head = content[: last.start()]
    thinking = _CLOSE.sub("", re.sub(r"<(think|thinking|reasoning)>", "", head, flags=re.I))
    return content[last.end():].lstrip(), thinking.strip()


def answer_so_far(content: str) -> str:
    """The answer part of streamed content so far ('' while the model is still thinking)."""
    return split_thinking(content)[0]


def reasoning_field(message: Any) -> str:
    """The reasoning a server sent in a field of its own beside the content (a message or a delta)."""
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def kept_thinking(*pieces: str) -> str | None:
    """The thinking as it is stored: joined, bounded (marked when cut) and under the text rule; None
    when there was none. A control character the rule refuses drops the text, saying so."""
    text = "\n\n".join(p.strip() for p in pieces if p and p.strip())
    if not text:
        return None
    if len(text) > THINKING_BOUND:
        text = text[:THINKING_BOUND] + f"… [cut at {THINKING_BOUND:,} of {len(text):,} characters]"
    try:
        return clean_text(text, "the reply's thinking")
    except TextRefused as e:
        return f"(thinking not kept: {e})"


# -- context windows ---------------------------------------------------------------------------------

#: a rough token count of one image (Anthropic: about width*height/750 for a 1092x1092 image)
IMAGE_TOKENS = 1_600
#: characters per token of the rough estimate (English text, both providers' tokenizers)
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A rough token count of `text` (characters / 4, rounded up): an estimate, not the tokenizer's."""
    return -(-len(text) // CHARS_PER_TOKEN)


_CONTEXT = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window|"
    r"exceeds the available context size|exceed(s|ed)? (the )?context|prompt is too long|"
    r"too many tokens|input length .* exceeds|n_ctx",
    re.I,
)


def prompt_tokens(body: dict[str, Any]) -> int:
    """A rough count of a request's input tokens: its texts (pxp.llm.models.estimate_tokens), each
    image as IMAGE_TOKENS."""
    texts: list[str] = []
    images = 0

    def walk(value: Any) -> None:
        nonlocal images
        if isinstance(value, dict):
            if value.get("type") in ("image", "image_url"):
                images += 1
                return
            for k, v in value.items():
                if k in ("text", "content", "system"):
                    walk(v) if not isinstance(v, str) else texts.append(v)
                elif isinstance(v, list | dict):
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk({"system": body.get("system", ""), "messages": body.get("messages", [])})
    return sum(estimate_tokens(t) for t in texts) + IMAGE_TOKENS * images


def is_context_exceeded(status: int | None, message: str) -> bool:
    """Whether an API error says the prompt does not fit the model's context window (OpenAI's
    `context_length_exceeded`, vLLM's "maximum context length", llama.cpp's "exceeds the available
    context size", Ollama's and LM Studio's wordings, Anthropic's "prompt is too long")."""
    return status in (400, 413, 422, 500, None) and _CONTEXT.search(message) is not None


def context_line(who: str, message: str, asked: int | None, body: Any = None) -> str:
    """One line naming the model, the size asked (pxp's rough count) and the server's own words (with
    llama.cpp's `n_prompt_tokens` and `n_ctx` beside them)."""
    size = f"a prompt of about {asked:,} tokens" if asked else "the prompt"
    said = " ".join(message.split())
    said = said if len(said) <= 200 else said[:200] + "…"
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("n_ctx"), int):
        said += f" ({err.get('n_prompt_tokens', '?')} tokens asked, context {err['n_ctx']})"
    said = f" (the server: {said})" if said else ""
    return f"{who}: {size} exceeds the model's context window{said}"


# -- slow first loads ----------------------------------------------------------------------------------

#: a local server's per-call timeout when none is set (PXP_LLM_TIMEOUT / a run's `timeout`): the first call may
#: wait 30-90 s while the server loads the model; apart from the retries (PXP_LLM_MAX_RETRIES)
LOCAL_TIMEOUT = 180.0
Waiting = Callable[[str], None]
_LISTENERS: list[Waiting] = []
_LOCK = threading.Lock()
_SAID: dict[str, float] = {}
_SHOWN: ContextVar[Waiting | None] = ContextVar("pxp_waiting_shown", default=None)


def slow_after() -> float:
    """Seconds before an unanswered call is shown as waiting for the model to load: PXP_LLM_SLOW_AFTER (declared
    in pxp.protocols.settings; tests use a fraction of a second)."""
    return float(setting("PXP_LLM_SLOW_AFTER"))


@contextmanager
def listening(show: Waiting) -> Iterator[None]:
    """Within this block, every slow call of the process (any thread) is told to `show` (the CLI progress)."""
    with _LOCK:
        _LISTENERS.append(show)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(show)


@contextmanager
def waiting_shown(show: Waiting) -> Iterator[None]:
    """Within this block, this thread's slow calls are told to `show` (the Annotate page's spinner)."""
    token = _SHOWN.set(show)
    try:
        yield
    finally:
        _SHOWN.reset(token)


@contextmanager
def watch(who: str, *, local: bool) -> Iterator[Callable[[], None]]:
    """Around one call: after `slow_after()` seconds without an answer, one line to every listener (from a
    timer thread). Yields a function that ends the watch early (a streamed answer's first piece)."""
    with _LOCK:
        targets = [*_LISTENERS]
    if (shown := _SHOWN.get()) is not None:
        targets.append(shown)
    if not targets:
        yield lambda: None
        return
    after = slow_after()
    what = "waiting for the model to load" if local else "waiting for the API to answer"
    line = f"{who}: {what} (no answer after {after:g} s)"

    def fire() -> None:
        with _LOCK:  # calls waiting together (a model loading) are said once
            if _SAID.get(line, -after) > time.monotonic() - after:
                return
            _SAID[line] = time.monotonic()
        for show in targets:
            with suppress(Exception):  # a display that cannot show it never fails the call
                show(line)

    timer = threading.Timer(after, fire)
    timer.daemon = True
    timer.start()
    try:
        yield timer.cancel
    finally:
        timer.cancel()
