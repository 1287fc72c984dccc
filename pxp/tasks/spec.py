"""A task as the LLM agents see it: prompts, output fields, MATCH, AGREE kind, parsing.

RAD, DRUG and config-defined tasks are all a `TaskSpec` (DESIGN §6); `rad.py`,
`drug.py` and `custom.py` build them. Parsing reads the provider's structured answer
when there is one, else the text `Prediction:` / `Explanation:` (or `Pathway:`)
robustly (markdown emphasis, headings, multi-line explanations, one-line answers).
A prediction that is not one of the labels, or not valid SMILES, is a format
problem: the agent re-asks, it never becomes a silent mismatch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.llm.base import Schema
from pxp.protocols.errors import PxpError
from pxp.protocols.text import TextRefused, clean_name, clean_text
from pxp.tasks.base import (
    DEFAULT_AGREE_THRESHOLD,
    match_for,
    normalise_label,
)

MATCH_KINDS = ("label", "smiles", "text")
AGREE_KINDS = ("lexical", "llm")

PREDICTION_ALIASES = ("prediction", "pathway", "diagnosis", "reactants")
EXPLANATION_ALIASES = ("explanation", "report", "reasoning", "rationale")


class FormatProblem(PxpError, ValueError):
    """An LLM answer that cannot be used; the message is the correction sent back, `kind` names
    what was wrong (one of FORMAT_KINDS) so aborted sessions are reported by reason."""

    def __init__(self, message: str, *, kind: str = "unusable answer") -> None:
        super().__init__(message)
        self.kind = kind


#: what can be wrong with an answer (DESIGN §1 "Format failures"): the reasons aborts are reported by
FORMAT_KINDS = ("refusal", "empty reply", "wrong structure", "no prediction", "no explanation",
                "prediction outside the task's labels", "invalid SMILES", "reply too long",
                "not Yes or No", "unusable answer")
_REFUSAL = re.compile(r"^\W*(i'?m sorry|i am sorry|sorry|i can(?:no|')t|i cannot|i won'?t|i'?m not able|"
                      r"i am not able|i'?m unable|i am unable|as an ai)\b", re.I)


def looks_like_refusal(text: str) -> bool:
    """Whether a reply without the answer's fields opens like a refusal ("I'm sorry, I can't…")."""
    return bool(_REFUSAL.match(text.strip()))


@dataclass(frozen=True, slots=True)
class FewShot:
    """One worked example shown in the system prompt (DRUG's few-shot file)."""

    input: str
    prediction: str
    explanation: str


@dataclass(frozen=True)
class TaskSpec:
    """Everything task-specific an LLM agent needs (ASSEMBLE_PROMPT's domain part)."""

    name: str
    match_kind: str = "text"
    agree_kind: str = "llm"
    labels: tuple[str, ...] = ()
    #: system prompt template; {labels} and {format} are filled in
    system: str = "You are an expert. Adhere to the following output format strictly, no extra text:\n{format}"
    #: the user text introducing instance x; {payload} and {labels} are filled in
    instance: str = "{payload}"
    #: what the instance is called in carried-over context ({payload} filled in)
    instance_short: str = "{payload}"
    prediction_field: str = "Prediction"
    prediction_hint: str = "<your prediction>"
    explanation_field: str = "Explanation"
    explanation_hint: str = "<your explanation>"
    #: the checker's system prompt ({labels} filled in); AGREE with an LLM
    checker: str = (
        "Your task is to check whether two explanations are consistent with each other. "
        "Your answer must be the same if the two explanations are swapped. "
        "Respond only with Yes or No."
    )
    image: bool = False
    few_shot: tuple[FewShot, ...] = ()
    max_tokens: int = 300
    agree_threshold: float = DEFAULT_AGREE_THRESHOLD
    expert: str = "the expert"
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- prompts ------------------------------------------------------------------------
    def _fill(self, template: str, **more: str) -> str:
        values = {"labels": ", ".join(self.labels), **more}
        return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)

    def format_block(self) -> str:
        return (f"{self.prediction_field}: {self._fill(self.prediction_hint)}\n"
                f"{self.explanation_field}: {self._fill(self.explanation_hint)}")

    def answer_text(self, prediction: str, explanation: str) -> str:
        """An answer written in the task's text format (assistant turns, context)."""
        return f"{self.prediction_field}: {prediction}\n{self.explanation_field}: {explanation}"

    def system_prompt(self) -> str:
        text = self._fill(self.system, format=self.format_block())
        if "{format}" not in self.system:
            text += ("\n\nAdhere to the following output format strictly, no extra text:\n"
                     + self.format_block())
        if self.few_shot:
            shots = "\n\n".join(
                f"Example {i}:\n{self._fill(self.instance_short, payload=s.input)}\n"
                + self.answer_text(s.prediction, s.explanation)
                for i, s in enumerate(self.few_shot, start=1)
            )
            text += "\n\nWorked examples:\n\n" + shots
        return text

    def instance_text(self, payload: str) -> str:
        return self._fill(self.instance, payload=payload)

    def short(self, payload: str) -> str:
        return self._fill(self.instance_short, payload=payload)

    def checker_prompt(self) -> str:
        return self._fill(self.checker)

    def schema(self) -> Schema:
        """The structured-output schema: {prediction, explanation}, labels as an enum."""
        pred: dict[str, Any] = {"type": "string",
                                "description": f"{self.prediction_field}: {self._fill(self.prediction_hint)}"}
        if self.match_kind == "label" and self.labels:
            pred["enum"] = list(self.labels)
        return Schema(
            name="answer",
            description="Give your prediction and explanation for the case.",
            schema={
                "type": "object",
                "properties": {
                    "prediction": pred,
                    "explanation": {"type": "string",
                                    "description": f"{self.explanation_field}: "
                                                   f"{self._fill(self.explanation_hint)}"},
                },
                "required": ["prediction", "explanation"],
                "additionalProperties": False,
            },
        )

    # -- MATCH --------------------------------------------------------------------------
    def match(self, y1: str, y2: str) -> bool:
        """MATCH on two predictions (a stored SMILES RDKit cannot read matches nothing)."""
        try:
            return match_for(self.match_kind)(y1, y2)
        except InvalidSmiles:
            return False

    # -- parsing ------------------------------------------------------------------------
    def check_prediction(self, prediction: str) -> str:
        """The prediction in canonical form, or FormatProblem with the correction."""
        y = _clean(prediction)
        if not y:
            raise FormatProblem(f"the {self.prediction_field} is missing", kind="no prediction")
        if self.match_kind == "label" and self.labels:
            wanted = normalise_label(y)
            for lab in self.labels:
                if normalise_label(lab) == wanted:
                    return lab
            raise FormatProblem(
                f"the {self.prediction_field} must be exactly one of: {', '.join(self.labels)} "
                f"(got {y[:80]!r})", kind="prediction outside the task's labels",
            )
        if self.match_kind == "smiles":
            parts = [p for p in re.split(r"[.\s,;]+", y.strip("`")) if p]
            try:
                smiles_set(".".join(parts))
            except InvalidSmiles as e:
                raise FormatProblem(
                    f"the {self.prediction_field} must be valid SMILES separated by '.' ({e})",
                    kind="invalid SMILES",
                ) from None
            return ".".join(parts)
        return y

    def parse(self, text: str, data: Mapping[str, Any] | None = None) -> tuple[str, str]:
        """(prediction, explanation) from a structured answer or from text."""
        if data is not None:
            y, e = data.get("prediction"), data.get("explanation")
            if isinstance(y, str) and isinstance(e, str):
                return self._checked(y, e)
        fields = parse_fields(text, self.prediction_field, self.explanation_field)
        y, e = fields.get("prediction", ""), fields.get("explanation", "")
        if not y and not e:
            raise FormatProblem(
                f"no '{self.prediction_field}:' and '{self.explanation_field}:' lines were found",
                kind=_kind_without_fields(text, data),
            )
        return self._checked(y, e)

    def _checked(self, y: str, e: str) -> tuple[str, str]:
        """Provider text under the one text rule, as user text (docs/development.md "The text rule"):
        a label with a zero-width space inside is that label; a control character is a format failure."""
        try:
            y = clean_name(re.sub(r"[\t\r\n]+", " ", y), f"the {self.prediction_field}")  # lines read as spaces
            e = clean_text(e, f"the {self.explanation_field}")
        except TextRefused as err:
            raise FormatProblem(str(err), kind="control character") from None
        prediction = self.check_prediction(y)
        explanation = _clean(e)
        if not explanation:
            raise FormatProblem(f"the {self.explanation_field} is missing", kind="no explanation")
        return prediction, explanation


def _kind_without_fields(text: str, data: Mapping[str, Any] | None) -> str:
    """Why a reply had neither field: empty, JSON of another shape, a refusal, or plain text."""
    t = text.strip().strip("`").strip()
    if data is not None or t.startswith(("{", "[")) or t.removeprefix("json").lstrip().startswith(("{", "[")):
        return "wrong structure"
    if not t:
        return "empty reply"
    if looks_like_refusal(t):
        return "refusal"
    return "no prediction"


# --- text parsing -------------------------------------------------------------------------

_EMPH = "*_`\"'"


def _clean(value: str) -> str:
    """Strip whitespace and wrapping markdown emphasis / code / quotes."""
    v = value.strip()
    prev = None
    while v != prev:
        prev = v
        v = v.strip().strip(_EMPH).strip()
    return v


def _names(*names: str) -> str:
    return "|".join(sorted({re.escape(n.lower()) for n in names}, key=len, reverse=True))


def parse_fields(text: str, prediction_field: str = "Prediction",
                 explanation_field: str = "Explanation") -> dict[str, str]:
    """The prediction and explanation fields of a text answer.

    Accepts `Prediction: x`, `**Prediction:** x`, `**Prediction**: x`, `*Prediction: x*`,
    `## Prediction` headings, list bullets, both fields on one line, and explanations
    spanning several lines; a JSON object with the two keys also works.
    """
    pred_names = (prediction_field, *PREDICTION_ALIASES)
    expl_names = (explanation_field, *EXPLANATION_ALIASES)
    names = _names(*pred_names, *expl_names)
    kind = {n.lower(): "prediction" for n in pred_names}
    kind.update({n.lower(): "explanation" for n in expl_names})
    js = _json_fields(text, kind)
    if js:
        return js
    emph = r"(?:\*\*|__|\*|_)?"
    # a one-line answer ("Prediction: x Explanation: y"): the capitalised main field
    # names that follow other text start their own line
    inline = "|".join(re.escape(n) for n in {prediction_field, explanation_field, "Prediction",
                                             "Explanation", "Pathway"})
    text = re.sub(rf"(?<=\S)[ \t]+(?={emph}(?:{inline}){emph}\s*[:：])", "\n", text)
    head = re.compile(
        rf"^\s*(?:#+\s*|[-*+>]\s+)?{emph}\s*({names})\s*{emph}\s*[:：]\s*(.*)$", re.I)
    heading = re.compile(rf"^\s*#+\s*{emph}\s*({names})\s*{emph}\s*[:：]?\s*$", re.I)
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = head.match(line) or heading.match(line)
        if m and kind[m.group(1).lower()] not in out:
            current = kind[m.group(1).lower()]
            rest = m.group(2) if m.lastindex and m.lastindex >= 2 else ""
            out[current] = [rest or ""]
        elif current is not None:
            out[current].append(line)
    return {k: _clean("\n".join(v)) for k, v in out.items()}


def _json_fields(text: str, kind: Mapping[str, str]) -> dict[str, str]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return {}
    try:
        obj = json.loads(text[start:end + 1])
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deeply to read: read as text
        return {}
    if not isinstance(obj, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in obj.items():
        k = kind.get(str(key).lower())
        if k and isinstance(value, str) and k not in out:
            out[k] = value
    return out if len(out) == 2 else {}


_PARTIAL = re.compile(r'"(prediction|explanation)"\s*:\s*"((?:[^"\\]|\\.)*)', re.S)


def partial_answer(text: str) -> tuple[str, str]:
    """(prediction, explanation) as far as a reply being streamed has got: from the growing JSON of a
    structured answer, else from its `Prediction:` / `Explanation:` lines (the explanation so far is
    the text itself until the fields appear). For display only; what is stored is parsed whole."""
    found = dict(_PARTIAL.findall(text)) if text.lstrip().startswith("{") else {}
    if found:
        out = []
        for key in ("prediction", "explanation"):
            raw = found.get(key, "").rstrip("\\")
            try:
                out.append(json.loads(f'"{raw}"'))
            except json.JSONDecodeError:
                out.append(raw)
        return out[0], out[1]
    if text.lstrip().startswith("{"):
        return "", ""
    fields = parse_fields(text)
    return fields.get("prediction", ""), fields.get("explanation", "") or (text if not fields else "")


def parse_yes_no(text: str) -> bool:
    """The checker's answer, strictly: "Yes" or "No" (case, emphasis, a final period)."""
    v = _clean(text).rstrip(".!").strip().lower()
    v = _clean(v)
    if v == "yes":
        return True
    if v == "no":
        return False
    raise FormatProblem(f"the answer must be exactly Yes or No (got {text.strip()[:40]!r})",
                        kind="not Yes or No" if text.strip() else "empty reply")


def few_shots(rows: Sequence[Mapping[str, Any]] | None) -> tuple[FewShot, ...]:
    """Few-shot examples from a dataset's config (DRUG: target, reactants, explanation)."""
    out = []
    for r in rows or ():
        inp = r.get("input", r.get("target", ""))
        pred = r.get("prediction", r.get("reactants", ""))
        expl = r.get("explanation", "")
        if inp and pred:
            out.append(FewShot(str(inp), str(pred), str(expl)))
    return tuple(out)
