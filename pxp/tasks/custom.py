"""Config-defined tasks: a TOML or JSON file, no code (DESIGN §6).

A config names labels (or free text), prompt templates, the MATCH kind (label,
smiles or text) and the AGREE kind (lexical or llm). It is stored with the dataset
(Dataset.config["task_config"]) so a run needs nothing else. See
pxp/tasks/examples/*.toml.

    name = "adr-causality"
    match = "label"            # label | smiles | text
    agree = "llm"              # lexical | llm
    labels = ["certain", "probable", "possible", "unlikely"]
    image = false
    max_tokens = 300
    [prompts]
    system = "You are a pharmacovigilance expert ... {format}"
    instance = "Case report: {payload}"
    checker = "... Respond only with Yes or No."
    [fields]
    prediction = "Causality"
    explanation = "Explanation"
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.data.match import look_alike_labels
from pxp.protocols.errors import PxpError
from pxp.protocols.text import clean_name, identity, strip_bom
from pxp.tasks.base import DEFAULT_AGREE_THRESHOLD, normalise_label
from pxp.tasks.spec import FewShot, TaskSpec

EXAMPLES = Path(__file__).parent / "examples"
#: the built-in tasks a config may not shadow
BUILTIN_TASKS = ("rad", "drug", "text")


class TaskConfigError(PxpError, ValueError):
    """A task config that cannot be used; the message names the problem."""


#: typed as declared: a string is never read as a boolean or a number ("yes" is not true)
_STRICT = ConfigDict(extra="forbid", strict=True)


def _filled(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return clean_name(value, "this field")


Filled = Annotated[str, AfterValidator(_filled)]
Name = Annotated[str, AfterValidator(lambda v: clean_name(v, "this value"))]
Label = Annotated[str, AfterValidator(lambda v: identity(v, "this label").text)]


class _Prompts(BaseModel):
    model_config = _STRICT
    system: str = "You are an expert. Adhere to the following output format strictly, no extra text:\n{format}"
    instance: str = "{payload}"
    instance_short: str | None = None
    checker: str = (
        "Your task is to check whether two explanations are consistent with each other. Your "
        "answer must be the same if the two explanations are swapped. Respond only with Yes or No."
    )


class _Fields(BaseModel):
    model_config = _STRICT
    prediction: Filled = "Prediction"
    prediction_hint: str | None = None
    explanation: Filled = "Explanation"
    explanation_hint: str = "<your explanation>"


class _Shot(BaseModel):
    model_config = _STRICT
    input: str
    prediction: str
    explanation: str = ""


class TaskConfig(BaseModel):
    """The schema of a task config file."""

    model_config = _STRICT
    name: Filled = Field(min_length=1, max_length=64)
    description: str = ""
    match: Literal["label", "smiles", "text"] = "text"
    agree: Literal["lexical", "llm"] = "llm"
    labels: list[Label] = Field(default_factory=list)
    image: bool = False
    max_tokens: int = Field(default=300, ge=1, le=32000)
    agree_threshold: float = Field(default=DEFAULT_AGREE_THRESHOLD, ge=0.0, le=1.0)
    expert: str = "the expert"
    prompts: _Prompts = Field(default_factory=_Prompts)
    fields: _Fields = Field(default_factory=_Fields)
    few_shot: list[_Shot] = Field(default_factory=list)

    @model_validator(mode="after")
    def _labels_for_label_match(self) -> TaskConfig:
        if self.match == "label" and not self.labels:
            raise ValueError("match = 'label' needs a non-empty labels list")
        if len({normalise_label(x) for x in self.labels}) != len(self.labels):
            raise ValueError("labels must be distinct")
        alike = look_alike_labels(self.labels)
        if alike is not None:
            raise ValueError(f"labels must be distinct: {alike[1]!r} looks the same as {alike[0]!r}")
        return self

    def spec(self) -> TaskSpec:
        hint = self.fields.prediction_hint or (
            "<exactly one of: {labels}>" if self.match == "label"
            else "<SMILES separated by '.'>" if self.match == "smiles" else "<your prediction>"
        )
        return TaskSpec(
            name=self.name,
            match_kind=self.match,
            agree_kind=self.agree,
            labels=tuple(self.labels),
            system=self.prompts.system,
            instance=self.prompts.instance,
            instance_short=self.prompts.instance_short or self.prompts.instance,
            prediction_field=self.fields.prediction,
            prediction_hint=hint,
            explanation_field=self.fields.explanation,
            explanation_hint=self.fields.explanation_hint,
            checker=self.prompts.checker,
            image=self.image,
            few_shot=tuple(FewShot(s.input, s.prediction, s.explanation) for s in self.few_shot),
            max_tokens=self.max_tokens,
            agree_threshold=self.agree_threshold,
            expert=self.expert,
        )


def _first_error(e: ValidationError, text: str = "") -> str:
    """The first problem, with the setting's line in the file's `text` when it can be found."""
    err = e.errors()[0]
    loc = [str(x) for x in err.get("loc", ())]
    where = ".".join(loc) or "config"
    line = _line_of(text, [x for x in loc if not x.isdigit()]) if text else None
    return f"{'' if line is None else f'line {line}: '}{where}: {err.get('msg', 'invalid')}"


def _line_of(text: str, loc: list[str]) -> int | None:
    """The line of a setting (`fields.prediction`) in a TOML or JSON text: its key after its table's."""
    lines = text.splitlines()
    start = 0
    for table in loc[:-1]:
        at = next((i for i in range(start, len(lines))
                   if re.match(rf'\s*(\[\[?\s*{re.escape(table)}\s*\]|"{re.escape(table)}"\s*:)', lines[i])), None)
        if at is not None:
            start = at
    key = re.escape(loc[-1]) if loc else ""
    found = next((i for i in range(start, len(lines))
                  if key and re.match(rf'\s*("{key}"\s*:|{key}\s*=)', lines[i])), None)
    return None if found is None else found + 1


#: the placeholders each template may use (pxp.tasks.spec.TaskSpec fills them in)
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "prompts.system": ("labels", "format"),
    "prompts.instance": ("payload", "labels"),
    "prompts.instance_short": ("payload", "labels"),
    "prompts.checker": ("labels",),
    "fields.prediction_hint": ("labels",),
    "fields.explanation_hint": ("labels",),
}
# "{" then a name, "}" or "!"/":" starts a placeholder; "{" before a quote or a space is literal text (JSON)
_OPENING = re.compile(r"\{(?=[\w}!:]|$)")
_GOOD = re.compile(r"\{(\w+)\}")


def placeholder_problem(where: str, template: str) -> str | None:
    """Why a template's placeholders cannot be filled in (unknown, malformed, unclosed), or None."""
    allowed = PLACEHOLDERS[where]
    for m in _OPENING.finditer(template):
        good = _GOOD.match(template, m.start())
        if good is None:
            bit = template[m.start():m.start() + 20].split("\n")[0]
            return (f"{where}: malformed or unclosed placeholder {bit!r}; write one of "
                    f"{', '.join('{' + a + '}' for a in allowed)}")
        if good.group(1) not in allowed:
            return (f"{where}: unknown placeholder {{{good.group(1)}}}; this template may use "
                    f"{', '.join('{' + a + '}' for a in allowed)}")
    return None


def config_problems(cfg: TaskConfig) -> list[str]:
    """What the schema cannot say: placeholders, empty labels, a built-in's name, few-shot answers."""
    out: list[str] = []
    if cfg.name.strip().lower() in BUILTIN_TASKS:
        out.append(f"name: {cfg.name!r} is a built-in task; choose another name")
    for i, lab in enumerate(cfg.labels, start=1):
        if not lab.strip():
            out.append(f"labels: label {i} is empty")
    templates = {"prompts.system": cfg.prompts.system, "prompts.instance": cfg.prompts.instance,
                 "prompts.instance_short": cfg.prompts.instance_short, "prompts.checker": cfg.prompts.checker,
                 "fields.prediction_hint": cfg.fields.prediction_hint,
                 "fields.explanation_hint": cfg.fields.explanation_hint}
    out += [p for w, t in templates.items() if t is not None and (p := placeholder_problem(w, t))]
    if not cfg.image and "{payload}" not in cfg.prompts.instance:
        out.append("prompts.instance: no {payload}, so the case is never sent; add {payload}")
    for i, shot in enumerate(cfg.few_shot, start=1):
        if (why := prediction_problem(cfg, shot.prediction)) is not None:
            out.append(f"few_shot[{i}].prediction: {why}")
    return out


def prediction_problem(cfg: TaskConfig, prediction: str) -> str | None:
    """Why `prediction` cannot be an answer of this task (a label outside the list, bad SMILES)."""
    if cfg.match == "label" and normalise_label(prediction) not in {normalise_label(x) for x in cfg.labels}:
        return f"{prediction[:60]!r} is not one of the labels ({', '.join(cfg.labels)})"
    if cfg.match == "smiles":
        try:
            smiles_set(prediction)
        except InvalidSmiles as e:
            return str(e)
    return None


def dataset_fit(cfg: TaskConfig, dataset: str, task: str, references: Sequence[tuple[str, str]]) -> str | None:
    """Why the config cannot be attached to this dataset (its task, or an instance's reference
    prediction (key, prediction) that is no answer of the config), or None."""
    if task == "drug" and cfg.match != "smiles":
        return f"dataset {dataset!r} holds SMILES (task drug); task {cfg.name!r} needs match = 'smiles'"
    for key, prediction in references:
        if prediction.strip() and (why := prediction_problem(cfg, prediction)) is not None:
            return (f"dataset {dataset!r}, instance {key!r}: its reference prediction does not fit task "
                    f"{cfg.name!r}: {why}")
    return None


def task_config(data: Mapping[str, Any], text: str = "") -> TaskConfig:
    """Validate a config mapping (from a file, whose `text` gives the lines, or the dataset)."""
    try:
        cfg = TaskConfig.model_validate(dict(data))
    except ValidationError as e:
        raise TaskConfigError(f"task config: {_first_error(e, text)}") from None
    problems = config_problems(cfg)
    if problems:
        raise TaskConfigError(f"task config: {problems[0]}")
    return cfg


def load_task_config(path: str | Path) -> TaskConfig:
    """Read a .toml or .json task config file."""
    p = Path(path)
    if p.suffix.lower() not in (".toml", ".json"):
        kind = p.suffix or "a file without a suffix"
        raise TaskConfigError(f"{p.name}: a task config is a .toml or .json file, not {kind}; convert it")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise TaskConfigError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = strip_bom(raw.decode("utf-8"))  # a byte-order mark (Windows editors) is accepted
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise TaskConfigError(f"{p.name}: line {line}: not UTF-8 text; save it as UTF-8") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise TaskConfigError(f"{p.name}: not valid {p.suffix.lstrip('.') or 'TOML'}: {e}") from None
    if not isinstance(data, dict):
        raise TaskConfigError(f"{p.name}: the top level must be a table/object")
    try:
        return task_config(data, text)
    except TaskConfigError as e:
        raise TaskConfigError(f"{p.name}: {e}") from None
