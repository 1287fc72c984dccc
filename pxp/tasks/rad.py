"""RAD: a chest X-ray in, one of the dataset's labels and a report out (Example 1).

MATCH is normalised label equality; AGREE is the checker LLM asked whether two
reports are consistent. The image is downscaled to the provider's limits and sent
base64 (pxp.llm.images). Generator max tokens 300 as in the papers' appendix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the study's five findings, used when a dataset names no labels
from pxp.data.match import STUDY_LABELS as STUDY_LABELS  # the study's five findings
from pxp.tasks.spec import TaskSpec

SYSTEM = (
    "You are a radiology expert, with detailed knowledge of {labels}. "
    "Each case is one chest X-ray that shows exactly one of these findings. "
    "Adhere to the following output format strictly, no extra text:\n{format}"
)
CHECKER = (
    "You are a radiology expert, with detailed knowledge of {labels}. Your task is to check "
    "whether two reports (explanations) of the same chest X-ray are consistent with each "
    "other. Ignore personal patient information such as age or name, and judge the findings "
    "only. Your answer must be the same if the two reports are swapped. "
    "Respond only with Yes or No."
)


def rad_spec(config: Mapping[str, Any] | None = None, labels: Sequence[str] = ()) -> TaskSpec:
    """The RAD task with the dataset's labels (config["labels"], else `labels`, else the study's)."""
    config = config or {}
    chosen = tuple(str(x) for x in (config.get("labels") or labels or STUDY_LABELS))
    return TaskSpec(
        name="rad",
        match_kind="label",
        agree_kind="llm",
        labels=chosen,
        system=SYSTEM,
        instance="Here is the chest X-ray. Which one of {labels} does it show? Explain your "
                 "reading as a short radiological report.",
        instance_short="a chest X-ray (image not repeated)",
        prediction_field="Prediction",
        prediction_hint="<exactly one of: {labels}>",
        explanation_field="Explanation",
        explanation_hint="<a short radiological report supporting the prediction>",
        checker=CHECKER,
        image=True,
        max_tokens=300,
        expert="the radiologist",
    )
