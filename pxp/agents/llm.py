"""The LLM machine-agent: ASSEMBLE_PROMPT, ASK_AGENT and UPDATE_CONTEXT (Algorithm 2).

The prompt is the task's system prompt (with few-shot examples), the context carried
over from earlier kept sessions, the instance (image for RAD, SMILES for DRUG), and
this session's exchange, the other agent's messages phrased by their tag. The stable
prefixes (system; carried context; instance) and the growing conversation end in
cache breakpoints. The machine never sees the instance's reference answer.

An answer that cannot be parsed is re-asked with a short correction, at most 5
attempts, then FormatFailure aborts the session. An API error that survives the
SDK's retries raises AgentUnavailable: the step writes nothing and can be resumed.
Every call, failed ones included, is a CallRecord on the query.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pxp.agents.base import (
    AgentBase,
    AgentUnavailable,
    Answer,
    CarriedSession,
    ContextTooLong,
    FormatFailure,
    Query,
)
from pxp.agents.checker import MAX_ATTEMPTS, Checker, accounted_call
from pxp.llm.base import (
    Completion,
    ImagePart,
    Part,
    Prompt,
    Provider,
    TextPart,
    Turn,
    excerpt,
    reply_bound,
    reply_size,
    text_sink,
)
from pxp.llm.images import ImageError, cached_image, image_detail, prepare_image
from pxp.protocols.pxp.common_ground import question_text
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.protocols.scorekeeping.rules import MAX_PROBE_ATTEMPTS, parse_probe, probe_prompt
from pxp.tasks.base import lexical_agree
from pxp.tasks.spec import FormatProblem, TaskSpec


def _disputed(msg: Msg) -> str:
    if msg.match is False and msg.agree is False:
        return "Both the prediction and the explanation are disputed."
    if msg.match is False:
        return "The prediction is disputed; the explanation is accepted."
    if msg.agree is False:
        return "The prediction is accepted, but the explanation is disputed."
    return "Your answer is disputed."


def phrase_other(msg: Msg, spec: TaskSpec) -> str:
    """The other agent's message j-1 as the machine reads it, phrased by its tag."""
    who = spec.expert[:1].upper() + spec.expert[1:]
    theirs = spec.answer_text(msg.prediction, msg.explanation)
    if msg.tag is Tag.RATIFY:
        return (f"{who} ratifies your answer: the prediction matches and the explanation "
                f"agrees.\n{theirs}")
    if msg.tag is Tag.REFUTE:
        return f"{who} refutes your answer. {_disputed(msg)} {who}'s answer is:\n{theirs}"
    if msg.tag is Tag.REVISE:
        return (f"{who} has revised their answer. {_disputed(msg)} {who}'s revised answer "
                f"is:\n{theirs}")
    if msg.tag is Tag.REJECT:
        return f"{who} rejects your answer. {_disputed(msg)} {who}'s answer is:\n{theirs}"
    return f"{who} says:\n{theirs}"


def _own(msg: Msg, spec: TaskSpec) -> str:
    return spec.answer_text(msg.prediction, msg.explanation)


def carried_text(n: int, c: CarriedSession, spec: TaskSpec) -> str:
    """One earlier kept session as context text (images are not repeated)."""
    lines = [f"Earlier case {n}: {spec.short(c.instance.payload)}"]
    for m in c.messages:
        if m.sender is Sender.MACHINE:
            lines.append(f"You ({m.tag.value}):\n{_own(m, spec)}")
        else:
            lines.append(phrase_other(m, spec))
    return "\n".join(lines)


REPLY = "Reply with your current answer in the required format."


def shorter(q: Query) -> tuple[Query, int, int] | None:
    """The query with a shorter context, and how many carried sessions and messages it drops: the oldest
    half of the carried sessions first, then the oldest half of this session's earlier exchanges (in
    pairs, so turns keep alternating); the case and the current exchange (the last two messages) are
    always kept (docs/research.md, Local models). None when nothing is left to drop."""
    if q.carry:
        drop = -(-len(q.carry) // 2)
        return dataclasses.replace(q, carry=tuple(q.carry)[drop:]), drop, 0
    pairs = max(0, len(q.history) - 2) // 2
    if pairs == 0:
        return None
    drop = 2 * -(-pairs // 2)
    return dataclasses.replace(q, history=tuple(q.history)[drop:]), 0, drop


def _reply_text(out: Completion) -> str:
    """A reply as text, for the record: its text, else its structured answer as JSON."""
    if out.text.strip() or out.data is None:
        return out.text
    return json.dumps(out.data, default=str)
ASIDE = ("Before you reply: a private question from the organiser follows (ME:). {who} will not "
         "see it and it does not count as your reply. Answer it with ASIDE: yes or ASIDE: no on one "
         "line and nothing else.")
PROBE_MAX_TOKENS = 16


class LLMMachine(AgentBase):
    """The machine-agent m backed by a provider (anthropic:<model>, openai:<model>)."""

    def __init__(
        self, provider: Provider, spec: TaskSpec, *, temperature: float | None = None,
        max_tokens: int | None = None, checker: Checker | None = None,
        structured: bool = True, max_attempts: int = MAX_ATTEMPTS, shorten: bool = False,
    ) -> None:
        self.provider = provider
        self.spec = spec
        self.temperature = temperature
        self.max_tokens = max_tokens or spec.max_tokens
        self.checker = checker
        self.structured = structured
        self.max_attempts = max_attempts
        #: a live session shortens a context over the window (`shorter`); a controlled run pauses instead
        self.shorten = shorten
        self.label = f"{provider.name}:{provider.model}"
        #: the largest image edge the model takes when configured (ProviderOptions.max_image_px)
        self.max_image_px: int | None = getattr(getattr(provider, "options", None), "max_image_px", None)
        self._last: dict[tuple[int | None, int], dict[str, Any]] = {}

    # ASSEMBLE_PROMPT ---------------------------------------------------------------
    def assemble(self, q: Query) -> Prompt:
        """The prompt for message q.j from the instance, the carried context and the exchange."""
        spec, x = self.spec, q.instance
        first: list[Part] = []
        if q.carry:
            first.append(TextPart("Use the following as context: earlier cases and the "
                                  f"feedback of {spec.expert}."))
            first.extend(TextPart(carried_text(i, c, spec), ref={"carried_session": c.session_id})
                         for i, c in enumerate(q.carry, 1))
            first[-1] = dataclasses.replace(first[-1], cache=True)
        first.append(TextPart(spec.instance_text(x.payload)))
        if spec.image:
            img = cached_image(x.asset_sha256, self.provider.name, self.max_image_px)
            data = x.load_image() if img is None else None
            if data is not None:
                try:
                    img = prepare_image(data, self.provider.name, sha256=x.asset_sha256, max_px=self.max_image_px)
                except ImageError as e:
                    raise AgentUnavailable(f"instance {x.key}: {e}") from None
            if img is None:
                raise AgentUnavailable(
                    f"instance {x.key!r} has no image, and task {spec.name} sends one; "
                    "import the dataset with its images"
                )
            first.append(img)
        first[-1] = dataclasses.replace(first[-1], cache=True)
        turns = [Turn("user", first)]
        for m in q.history:
            if m.sender is q.sender:
                turns.append(Turn("assistant", [TextPart(_own(m, spec))]))
            else:
                turns.append(Turn("user", [TextPart(f"{phrase_other(m, spec)}\n\n{REPLY}")]))
        if len(turns) > 1:
            last = turns[-1]
            last.parts[-1] = dataclasses.replace(last.parts[-1], cache=True)
        return Prompt(system=spec.system_prompt(), turns=turns)

    # ASK_AGENT -----------------------------------------------------------------------
    def ask(self, q: Query) -> Answer:
        """ASK_AGENT; with `shorten`, a prompt over the model's context window is asked again shorter
        (`shorter`), the shortening recorded on each call that follows."""
        view, dropped = q, {"carried_sessions": 0, "messages": 0}
        while True:
            try:
                return self._ask(view, {"context_shortened": dict(dropped)} if any(dropped.values()) else None)
            except ContextTooLong as e:
                smaller = shorter(view) if self.shorten else None
                if smaller is None:
                    if any(dropped.values()):
                        raise ContextTooLong(str(e).replace("; nothing was stored", " (even shortened to the case and "
                                                            "the current exchange); nothing was stored", 1)) from None
                    raise
                view, carried, messages = smaller
                dropped["carried_sessions"] += carried
                dropped["messages"] += messages

    def _ask(self, q: Query, detail: dict[str, Any] | None) -> Answer:
        prompt = self.assemble(q)
        images = [p for t in prompt.turns for p in t.parts if isinstance(p, ImagePart)]
        if images:  # the size sent, the size it was made from and the limit, on each call
            detail = {**(detail or {}), "image": image_detail(images[0], self.provider.name, self.max_image_px)}
        purpose = "ask" if q.session_id is not None else "eval"
        schema = self.spec.schema() if self.structured else None
        problem = FormatProblem("no attempt was made")
        last = ""
        sink = text_sink() if q.session_id is not None else None
        stream: dict[str, Any] = {"on_text": sink} if sink is not None else {}
        for attempt in range(1, self.max_attempts + 1):
            record, out = accounted_call(self.provider, prompt, q.calls, purpose=purpose, attempt=attempt,
                                         max_tokens=self.max_tokens, temperature=self.temperature,
                                         schema=schema, detail=detail, **stream)
            try:
                prediction, explanation = self._read(out)
            except FormatProblem as e:
                problem, last = e, _reply_text(out)
                record.error = f"format: {e.kind}: {e}"
                prompt.turns.append(Turn("assistant", [TextPart(self._echo(out, e) or "(empty answer)")]))
                prompt.turns.append(Turn("user", [TextPart(
                    f"Your answer could not be used: {e}. Answer again, exactly in this "
                    f"format and nothing else:\n{self.spec.format_block()}"
                )]))
                continue
            if q.session_id is not None:  # an evaluation stores no context
                self._last[(q.session_id, q.j)] = {
                    "prompt": prompt.snapshot(), "attempts": attempt,
                    "raw": out.text if out.data is None else out.data,
                }
            return Answer(prediction, explanation)
        raise FormatFailure(
            f"{problem.kind}: {self.label} gave no usable answer in {self.max_attempts} attempts ({problem}); "
            f"last reply: {excerpt(last)!r}",
            kind=problem.kind, model=self.label, reply=excerpt(last),
        )

    def _read(self, out: Completion) -> tuple[str, str]:
        """(prediction, explanation) of a reply, or FormatProblem naming what is wrong with it."""
        size, bound = reply_size(out), reply_bound(self.max_tokens)
        if size > bound:
            raise FormatProblem(f"the answer is {size:,} bytes, over the {bound:,}-byte bound; be brief",
                                kind="reply too long")
        if out.stop_reason == "refusal":
            raise FormatProblem("the answer was a refusal; give your best answer for this case",
                                kind="refusal")
        try:
            return self.spec.parse(out.text, out.data)
        except FormatProblem as e:
            if out.stop_reason in ("max_tokens", "length"):
                raise FormatProblem(f"{e} (the answer was cut off at the token limit; be brief)",
                                    kind=e.kind) from None
            raise

    def _echo(self, out: Completion, problem: FormatProblem) -> str:
        """The unusable answer as it is put back into the conversation (never more than the bound)."""
        if problem.kind == "reply too long":
            return excerpt(_reply_text(out), 2_000)
        if out.data:
            return self.spec.answer_text(str(out.data.get("prediction", "")), str(out.data.get("explanation", "")))
        return out.text.strip()

    # PROBE (docs/research.md, Common-ground probe) --------------------------------------------------------------
    def probe(self, q: Query, question: str) -> bool | None:
        """A private yes/no answer about the session so far (q.history), outside its context.

        The prompt is this session's dialogue (no carried context) with the question put after the
        human's last message; the reply `ASIDE: yes|no` is parsed and re-asked as the scorekeeping
        game does (pxp.protocols.scorekeeping.rules), at most 5 attempts, then None (invalid).
        Nothing is stored in the context; every call is a CallRecord with purpose "probe".
        """
        spec = self.spec
        plain = dataclasses.replace(q, carry=(), calls=[])
        prompt = self.assemble(plain)
        last = q.history[-1]
        text = question_text(question, spec.expert)
        head = f"{phrase_other(last, spec)}\n\n{ASIDE.format(who=spec.expert[:1].upper() + spec.expert[1:])}"
        base = prompt.turns[-1].parts[:-1]
        for attempt in range(1, MAX_PROBE_ATTEMPTS + 1):
            prompt.turns[-1] = Turn("user", [*base, TextPart(f"{head}\n{probe_prompt(text, attempt)}")])
            record, out = accounted_call(self.provider, prompt, q.calls, purpose="probe", attempt=attempt,
                                         max_tokens=PROBE_MAX_TOKENS, temperature=self.temperature)
            value = parse_probe(out.text.strip())
            if value is not None:
                return value == 1
            record.error = f"probe: not ASIDE: yes|no ({out.text.strip()[:40]!r})"
        return None

    # MATCH / AGREE -------------------------------------------------------------------
    def match(self, y1: str, y2: str, q: Query) -> bool:
        return self.spec.match(y1, y2)

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        if self.checker is not None:
            return self.checker.agree(e1, e2, q.calls)
        return lexical_agree(e1, e2, self.spec.agree_threshold)

    # UPDATE_CONTEXT ------------------------------------------------------------------
    def context(self, q: Query, answer: Answer, tag: Tag) -> dict[str, Any]:
        """C_j: the assembled prompt that produced the answer (images by sha256)."""
        last = self._last.pop((q.session_id, q.j), {})
        return {
            "agent": self.label,
            "task": self.spec.name,
            "j": q.j,
            "tag": tag.value,
            "carried_sessions": [c.session_id for c in q.carry],
            "answer": {"prediction": answer.prediction, "explanation": answer.explanation},
            "attempts": last.get("attempts"),
            "raw": last.get("raw"),
            "prompt": last.get("prompt"),
            "checker": self.checker.label if self.checker is not None else "lexical",
        }
