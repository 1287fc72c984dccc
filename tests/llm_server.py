"""A local HTTP server speaking the Anthropic Messages and OpenAI Chat Completions wire
formats, so tests run the real SDKs end to end (no mocks of our code).

Each test scripts it with a `handler(req) -> Reply`; it records every request. Start
one with the `llm_server` fixture (tests/llm/, tests/running/) or `FakeLLM()` as a context
manager. Anthropic clients use `server.url`, OpenAI clients `server.url + "/v1"`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    """One recorded request."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api(self) -> str:
        return "anthropic" if self.path.endswith("/messages") else "openai"

    @property
    def max_tokens(self) -> int | None:
        b = self.body
        return b.get("max_tokens", b.get("max_completion_tokens"))

    @property
    def is_checker(self) -> bool:
        return self.max_tokens == 10

    def system(self) -> str:
        if self.api == "anthropic":
            s = self.body.get("system", "")
            return s if isinstance(s, str) else "".join(b.get("text", "") for b in s)
        return next((m["content"] for m in self.body["messages"] if m["role"] == "system"), "")

    def texts(self) -> list[str]:
        """Every text block of the conversation (not the system prompt), in order."""
        out = []
        for m in self.body["messages"]:
            if m["role"] == "system":
                continue
            c = m["content"]
            if isinstance(c, str):
                out.append(c)
            else:
                out.extend(b["text"] for b in c if b.get("type") == "text")
        return out

    def last_user_text(self) -> str:
        for m in reversed(self.body["messages"]):
            if m["role"] == "user":
                c = m["content"]
                return c if isinstance(c, str) else "\n".join(
                    b["text"] for b in c if b.get("type") == "text")
        return ""

    def images(self) -> list[tuple[str, str]]:
        """(media_type, base64 data) of every image in the request."""
        out = []
        for m in self.body["messages"]:
            c = m["content"]
            if isinstance(c, str):
                continue
            for b in c:
                if b.get("type") == "image":
                    out.append((b["source"]["media_type"], b["source"]["data"]))
                elif b.get("type") == "image_url":
                    url = b["image_url"]["url"]
                    head, _, data = url.partition(",")
                    out.append((head.removeprefix("data:").removesuffix(";base64"), data))
        return out


@dataclass
class Reply:
    """What the server sends back: an answer (text or structured) or an error status."""

    text: str | None = None
    data: dict[str, Any] | None = None
    status: int = 200
    error: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop: str | None = None
    #: a raw body sent as is (truncated JSON, a proxy's HTML page), with `content_type`
    raw: bytes | None = None
    content_type: str = "application/json"
    #: a streamed reply (a request with "stream": true) is cut off after this many text chunks
    cut_after: int | None = None
    #: seconds before a streamed reply's first piece, and between its pieces (benchmarks' latency)
    first_delay: float = 0.0
    piece_delay: float = 0.0
    #: reasoning sent beside the answer, as `thinking_as` says (a MODES name); set by `FakeLLM.mode`
    thinking: str | None = None
    thinking_as: str = "think-inline"
    #: no `usage` in the reply (Chat Completions only: the Messages API always counts)
    no_usage: bool = False
    #: an error body sent as is (each engine's own shape), with `status`
    error_body: dict[str, Any] | None = None


def answer(prediction: str, explanation: str, *, structured: bool = True) -> Reply:
    """A generator answer: structured (tool / json) or as Prediction/Explanation text."""
    if structured:
        return Reply(data={"prediction": prediction, "explanation": explanation})
    return Reply(text=f"Prediction: {prediction}\nExplanation: {explanation}")


Handler = Callable[[Request], Reply]

# --- local servers' behaviours (docs/research.md, Local models) ----------------------------------------------

#: thinking that would mislead a parser reading it as the answer: a JSON fragment, labels in prose, a format line
THINKING = ('Okay, the user wants a label. Maybe {"prediction": "Atelectasis", "explanation": "volume loss"}? '
            "No: Effusion, or Pneumonia... Prediction: Effusion\nExplanation: blunted angle. Let me answer properly.")
#: what `FakeLLM.mode` may name, several joined by "+": inline thinking blocks, thinking whose opening tag was in
#: the prompt, reasoning in a field of its own (streamed as reasoning deltas), Anthropic extended-thinking blocks,
#: no usage, a slow first call, and a context window (`context_tokens`) answered in one engine's wording
MODES = ("plain", "think-inline", "thinking-inline", "think-close-only", "reasoning_content", "reasoning",
         "anthropic-thinking", "no-usage", "slow-first", "context")
#: each engine's documented answer to a prompt over its context window: (status, body); {n} the tokens asked
CONTEXT_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "openai": (400, {"error": {"message": "This model's maximum context length is {ctx} tokens. However, your "
                               "messages resulted in {n} tokens. Please reduce the length of the messages.",
                               "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}}),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is {ctx} tokens. However, you "
                   "requested {n} tokens ({n} in the messages, 0 in the completion). Please reduce the length of "
                   "the messages or completion.", "type": "BadRequestError", "param": None, "code": 400}),
    "llama.cpp": (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                  "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": "{n}",
                                  "n_ctx": "{ctx}"}}),
    "ollama": (400, {"error": {"message": "prompt too long; exceeded max context length by {over} tokens",
                               "type": "api_error", "param": None, "code": None}}),
    "lmstudio": (400, {"error": "Trying to keep the first {n} tokens when context the overflows. However, the model "
                                "is loaded with context length of only {ctx} tokens, which is not enough. Try to load "
                                "the model with a larger context length, or provide a shorter input"}),
    "anthropic": (400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "prompt is too long: {n} tokens > {ctx} maximum"}}),
}


def request_tokens(req: Request) -> int:
    """The server's rough count of a request's tokens (its JSON over 4; an image as 1,000)."""
    body = json.dumps(req.body.get("messages", []))
    return len(re.sub(r"[A-Za-z0-9+/=]{200,}", "", body)) // 4 + 1_000 * len(req.images())


def _fill(obj: Any, **values: int) -> Any:
    if isinstance(obj, str):
        out = obj.format(**values)
        return int(out) if out.isdigit() and obj.startswith("{") else out
    if isinstance(obj, dict):
        return {k: _fill(v, **values) for k, v in obj.items()}
    return obj


def _anthropic_body(req: Request, r: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    tool = (req.body.get("tool_choice") or {}).get("name")
    if r.data is not None and tool:
        content.append({"type": "tool_use", "id": "toolu_1", "name": tool, "input": r.data})
        stop = "tool_use"
    else:
        text = r.text if r.text is not None else json.dumps(r.data)
        content.append({"type": "text", "text": text})
        stop = "end_turn"
    if r.thinking is not None:
        content.insert(0, {"type": "thinking", "thinking": r.thinking, "signature": "c2lnbmF0dXJl"})
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0, **r.usage}
    return {"id": "msg_test", "type": "message", "role": "assistant",
            "model": req.body.get("model", "m"), "content": content,
            "stop_reason": r.stop or stop, "stop_sequence": None, "usage": usage}


def _openai_body(req: Request, r: Reply) -> dict[str, Any]:
    structured = "response_format" in req.body
    if r.data is not None and structured:
        text = json.dumps(r.data)
    elif r.data is not None:
        text = f"Prediction: {r.data['prediction']}\nExplanation: {r.data['explanation']}"
    else:
        text = r.text or ""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if r.thinking is not None and r.thinking_as in ("reasoning_content", "reasoning"):
        message[r.thinking_as] = r.thinking
    elif r.thinking is not None:
        tag = "thinking" if r.thinking_as == "thinking-inline" else "think"
        opening = "" if r.thinking_as == "think-close-only" else f"<{tag}>\n"
        message["content"] = f"{opening}{r.thinking}\n</{tag}>\n\n{text}"
    u = {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 0, **r.usage}
    body: dict[str, Any] = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
        "model": req.body.get("model", "m"),
        "choices": [{"index": 0, "message": message, "finish_reason": r.stop or "stop", "logprobs": None}],
        "usage": {"prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
                  "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
                  "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]}},
    }
    if r.no_usage:
        del body["usage"]
    return body


def _chunks(text: str, size: int = 12) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _sse_anthropic(req: Request, r: Reply) -> list[str]:
    """The Messages API's server-sent events for a reply (text, or a tool call's JSON in pieces)."""
    whole = _anthropic_body(req, r)
    start = {"type": "message_start", "message": {**whole, "content": [], "stop_reason": None,
                                                    "usage": {**whole["usage"], "output_tokens": 1}}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", start)]
    for i, block in enumerate(whole["content"]):
        if block["type"] == "thinking":  # extended thinking: thinking deltas, then its signature
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _chunks(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "tool_use":
            first = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _chunks(json.dumps(block["input"]))]
        else:
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _chunks(block["text"])]
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"],
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": whole["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]


def _sse_openai(req: Request, r: Reply) -> list[str]:
    """Chat Completions' streamed chunks for a reply, the usage last (stream_options.include_usage)."""
    whole = _openai_body(req, r)
    message = whole["choices"][0]["message"]
    text = message["content"]
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": 0, "model": whole["model"]}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for name in ("reasoning_content", "reasoning"):  # reasoning deltas first (content null meanwhile)
        if name in message:
            out += [{**base, "choices": [{"index": 0, "delta": {name: p, "content": None}, "finish_reason": None}]}
                    for p in _chunks(message[name])]
    out += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in _chunks(text)]
    out += [{**base, "choices": [{"index": 0, "delta": {}, "finish_reason": whole["choices"][0]["finish_reason"]}]}]
    if "usage" in whole:
        out.append({**base, "choices": [], "usage": whole["usage"]})
    return [f"data: {json.dumps(c)}\n\n" for c in out] + ["data: [DONE]\n\n"]


class FakeLLM:
    """The scriptable server; `handler` answers each request (default: an error 500)."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler = handler or (lambda req: Reply(status=500, error="no handler"))
        self.requests: list[Request] = []
        #: what GET /v1/models lists
        self.models: list[str] = ["claude-sonnet-4-6", "claude-haiku-4-5", "gpt-4.1", "gpt-4.1-mini"]
        #: what every GET answers instead (status, content type and `raw` body), when set
        self.get_reply: Reply | None = None
        #: local servers' behaviours (MODES, several joined by "+"), applied to every reply the handler gives
        self.mode = "plain"
        #: slow-first: seconds the first request waits (the model loading) before any answer
        self.slow_first = 1.2
        #: context: the window in tokens (request_tokens) and the engine whose wording answers a larger request
        self.context_tokens = 2_000
        self.engine = "vllm"
        self._lock = threading.Lock()
        self._ready_at = 0.0
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms stalls)

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                """GET /v1/models in the Anthropic (anthropic-version header) or OpenAI format."""
                anthropic_api = "anthropic-version" in {k.lower() for k in self.headers}
                if outer.get_reply is not None:  # any GET (a model list, a provider's metadata) answered as scripted
                    r = outer.get_reply
                    self.send_response(r.status)
                    self.send_header("content-type", r.content_type)
                    self.send_header("content-length", str(len(r.raw or b"")))
                    self.end_headers()
                    self.wfile.write(r.raw or b"")
                    return
                if not self.path.split("?")[0].endswith("/models"):
                    self.send_error(404)
                    return
                if anthropic_api:
                    data = [{"type": "model", "id": m, "display_name": m,
                             "created_at": "2026-01-01T00:00:00Z"} for m in outer.models]
                    body: dict[str, Any] = {"data": data, "has_more": False,
                                            "first_id": outer.models[0] if outer.models else None,
                                            "last_id": outer.models[-1] if outer.models else None}
                else:
                    body = {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                        "owned_by": "test"} for m in outer.models]}
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b"{}"
                req = Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                              json.loads(raw or b"{}"))
                with outer._lock:
                    outer.requests.append(req)
                try:
                    r = outer._moded(req, outer.handler(req))
                except Exception as e:
                    r = Reply(status=500, error=f"handler failed: {e!r}")
                if r.error_body is not None:
                    body: dict[str, Any] = r.error_body
                elif r.status != 200:
                    if req.api == "anthropic":
                        body = {"type": "error",
                                                "error": {"type": "api_error", "message": r.error}}
                    else:
                        body = {"error": {"message": r.error, "type": "server_error", "code": None}}
                elif req.body.get("stream") and r.raw is None:
                    self._stream(req, r)
                    return
                else:
                    body = _anthropic_body(req, r) if req.api == "anthropic" else _openai_body(req, r)
                data = json.dumps(body).encode() if r.raw is None else r.raw
                self.send_response(r.status)
                self.send_header("content-type", r.content_type)
                self.send_header("content-length", str(len(data)))
                # the SDKs honour retry-after-ms: retries in tests take a millisecond
                self.send_header("retry-after-ms", "1")
                for k, v in r.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client timed out
                    self.wfile.write(data)

            def _stream(self, req: Request, r: Reply) -> None:
                """Server-sent events, one text piece at a time; cut off (connection closed) after
                `r.cut_after` of them when the reply says so."""
                events = _sse_anthropic(req, r) if req.api == "anthropic" else _sse_openai(req, r)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    for i, event in enumerate(events):
                        first = 2 if req.api == "anthropic" else 1  # the first event carrying text
                        time.sleep(r.first_delay if i == first else r.piece_delay if i > first else 0.0)
                        if r.cut_after is not None and i >= 2 + r.cut_after:
                            self.wfile.write(b"data: {\"type\": \"content_block_del")  # half an event
                            self.wfile.flush()
                            return
                        self.wfile.write(event.encode())
                        self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.openai_url = self.url + "/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()

    def _moded(self, req: Request, r: Reply) -> Reply:
        """The handler's reply as the server's modes change it (MODES)."""
        modes = set(self.mode.split("+"))
        unknown = modes - set(MODES)
        if unknown:
            raise ValueError(f"unknown server modes {sorted(unknown)}")
        if "slow-first" in modes:  # every request waits until the model is loaded, `slow_first` after the first
            with self._lock:
                self._ready_at = self._ready_at or time.monotonic() + self.slow_first
            time.sleep(max(0.0, self._ready_at - time.monotonic()))
        if "context" in modes and r.status == 200 and (n := request_tokens(req)) > self.context_tokens:
            engine = "anthropic" if req.api == "anthropic" else self.engine
            status, body = CONTEXT_ERRORS[engine]
            filled = _fill(body, n=n, ctx=self.context_tokens, over=n - self.context_tokens)
            return Reply(status=status, error_body=filled)
        if r.status != 200:
            return r
        thinking = [m for m in MODES[1:6] if m in modes]
        if thinking and req.api == "openai":
            r = dataclasses.replace(r, thinking=THINKING, thinking_as=thinking[0])
        if "anthropic-thinking" in modes and req.api == "anthropic":
            r = dataclasses.replace(r, thinking=THINKING)
        if "no-usage" in modes:
            r = dataclasses.replace(r, no_usage=True)
        return r

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def generator_requests(self) -> list[Request]:
        return [r for r in self.requests if not r.is_checker]

    def checker_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_checker]


def serve_both_apis(monkeypatch: Any, *, retries: str = "0") -> Iterator[FakeLLM]:
    """A FakeLLM that the anthropic and openai providers reach through their environment (a test key,
    both base URLs, the SDKs' retries); for a fixture: `yield from serve_both_apis(monkeypatch)`."""
    with FakeLLM() as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.setenv("OPENAI_BASE_URL", s.openai_url)
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", retries)
        yield s


def sequence(*replies: Reply) -> Handler:
    """Answer with the replies in order, then repeat the last one."""
    it: Iterator[Reply] = iter(replies)
    last: list[Reply] = [replies[-1]]

    def handler(req: Request) -> Reply:
        with contextlib.suppress(StopIteration):
            last[0] = next(it)
        return last[0]

    return handler


# --- a fake model that learns from feedback --------------------------------------------------

_AB = re.compile(r"Explanation A:\n(?P<a>.*?)\n\nExplanation B:\n(?P<b>.*?)\n\nAre these", re.S)


def checker_reply(req: Request) -> Reply:
    """The checker: Yes when the two explanations are lexically alike (a stand-in judgement)."""
    from pxp.tasks.base import lexical_agree

    m = _AB.search(req.last_user_text())
    if m is None:
        return Reply(text="Maybe")
    return Reply(text="Yes" if lexical_agree(m.group("a"), m.group("b")) else "No")


def _two_fields(text: str) -> dict[str, str]:
    """`<Field>: y` then `<Field>: e` (the task's answer format, whatever the field names)."""
    head, _, rest = text.strip().partition("\n")
    return {"prediction": head.partition(":")[2].strip(), "explanation": rest.partition(":")[2].strip()}


def adopting_model(first: Callable[[Request], Reply]) -> Handler:
    """A generator that answers `first(req)` at message 1, adopts the other agent's answer
    when it is disputed, keeps its own when ratified; and a lexical checker."""

    def handler(req: Request) -> Reply:
        if req.is_checker:
            return checker_reply(req)
        has_turns = any(m["role"] == "assistant" for m in req.body["messages"])
        # this session's latest message from the other agent (not the carried context)
        last = req.body["messages"][-1]["content"] if has_turns else ""
        last = last if isinstance(last, str) else last[-1].get("text", "")
        if "answer is:" in last:
            return Reply(data=_two_fields(last.split("answer is:", 1)[1].split("\n\nReply with")[0]))
        if "ratifies your answer" in last:
            msgs = [m for m in req.body["messages"] if m["role"] == "assistant"]
            c = msgs[-1]["content"]
            return Reply(data=_two_fields(c if isinstance(c, str) else c[0]["text"]))
        return first(req)

    return handler
