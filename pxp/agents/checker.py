"""AGREE with a checker LLM: "are these two explanations consistent?" (the papers' §5).

Temperature 0 and 10 output tokens as in the papers' appendix. The answer is parsed
strictly (Yes or No); anything else is re-asked with a short correction, at most 5
attempts, then a FormatFailure aborts the session. Identical explanations agree
without a call, and a pair already judged in this run is not asked again (the
checker is told to be symmetric, so the pair is unordered).
"""

from __future__ import annotations

from typing import Any

from pxp.agents.base import AgentUnavailable, CallRecord, ContextTooLong, FormatFailure, Query
from pxp.agents.proxy import HumanProxy
from pxp.llm import journal
from pxp.llm.base import (
    Completion,
    ContextExceeded,
    LLMError,
    Prompt,
    Provider,
    TextPart,
    Turn,
    excerpt,
    reply_bound,
    reply_size,
)
from pxp.llm.limits import call_slot
from pxp.llm.local import watch
from pxp.tasks.spec import FormatProblem, TaskSpec, parse_yes_no

MAX_ATTEMPTS = 5
CHECKER_TEMPERATURE = 0.0
CHECKER_MAX_TOKENS = 10


def accounted_call(
    provider: Provider, prompt: Prompt, calls: list[CallRecord], *, purpose: str, attempt: int,
    unavailable: str = "", detail: dict[str, Any] | None = None, **kwargs: Any,
) -> tuple[CallRecord, Completion]:
    """One LLM call in a slot of the shared limit, accounted as a CallRecord appended to `calls` (with
    `detail`: what was done to fit the call).

    An LLMError is recorded on the call and raised as AgentUnavailable (prefixed `unavailable`), a prompt
    over the context window as ContextTooLong.
    """
    record = CallRecord(provider=provider.name, model=provider.model, purpose=purpose, attempt=attempt,
                        detail=detail)
    calls.append(record)
    record.pending_id = journal.sent(provider.name, provider.model, purpose, attempt)
    local = bool(getattr(provider, "local", False))  # a local server: a slow call is the model loading
    try:
        with call_slot(), watch(f"{provider.name}:{provider.model}", local=local) as seen:
            if kwargs.get("on_text") is not None:  # a streamed answer's first piece: the model is loaded
                show = kwargs["on_text"]
                kwargs["on_text"] = lambda text: (seen(), show(text))[-1]
            out = provider.complete(prompt, **kwargs)
    except LLMError as e:
        record.error = str(e)
        raise (ContextTooLong if isinstance(e, ContextExceeded) else AgentUnavailable)(f"{unavailable}{e}") from None
    record.tokens_in, record.tokens_out = out.tokens_in, out.tokens_out
    record.cache_read, record.cache_write = out.cache_read, out.cache_write
    record.latency_ms, record.cost_usd = out.latency_ms, out.cost_usd
    record.thinking = out.thinking
    return record, out


def _same(e1: str, e2: str) -> bool:
    return " ".join(e1.split()).casefold() == " ".join(e2.split()).casefold()


class Checker:
    """The checker LLM of a run (shared by the machine and the human proxy)."""

    def __init__(
        self, provider: Provider, spec: TaskSpec, *, temperature: float | None = CHECKER_TEMPERATURE,
        max_tokens: int = CHECKER_MAX_TOKENS, max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.provider = provider
        self.spec = spec
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_attempts = max_attempts
        self._known: dict[frozenset[str], bool] = {}

    @property
    def label(self) -> str:
        return f"{self.provider.name}:{self.provider.model}"

    def prompt(self, e1: str, e2: str) -> Prompt:
        question = (f"Explanation A:\n{e1}\n\nExplanation B:\n{e2}\n\n"
                    "Are these two explanations consistent? Answer Yes or No.")
        return Prompt(system=self.spec.checker_prompt(), turns=[Turn("user", [TextPart(question)])])

    def agree(self, e1: str, e2: str, calls: list[CallRecord], *, purpose: str = "agree") -> bool:
        """AGREE(e1, e2); every call is appended to `calls`."""
        if _same(e1, e2):
            return True
        key = frozenset((e1, e2))
        if key in self._known:
            return self._known[key]
        prompt = self.prompt(e1, e2)
        problem = FormatProblem("no attempt was made")
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            record, out = accounted_call(self.provider, prompt, calls, purpose=purpose, attempt=attempt,
                                         unavailable="checker ", max_tokens=self.max_tokens,
                                         temperature=self.temperature)
            try:
                size, bound = reply_size(out), reply_bound(self.max_tokens)
                if size > bound:
                    raise FormatProblem(f"the answer is {size:,} bytes, over the {bound:,}-byte bound",
                                        kind="reply too long")
                verdict = parse_yes_no(out.text)
            except FormatProblem as e:
                problem, last = e, out.text
                record.error = f"format: {e.kind}: {e}"
                prompt.turns.append(Turn("assistant", [TextPart(excerpt(out.text, 200) or "(empty)")]))
                prompt.turns.append(Turn("user", [TextPart(
                    f"Your answer could not be read: {e}. Answer with the single word Yes or No."
                )]))
                continue
            self._known[key] = verdict
            return verdict
        raise FormatFailure(
            f"{problem.kind}: checker {self.label} gave no Yes/No answer in {self.max_attempts} attempts "
            f"({problem}); last reply: {excerpt(last)!r}",
            kind=problem.kind, model=self.label, reply=excerpt(last),
        )


class CheckedHumanProxy(HumanProxy):
    """The database human-proxy whose AGREE is the checker LLM (as in the papers)."""

    def __init__(self, checker: Checker, *, match_kind: str | None = None) -> None:
        super().__init__(match_kind=match_kind, agree_threshold=checker.spec.agree_threshold)
        self.checker = checker

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        return self.checker.agree(e1, e2, q.calls)
