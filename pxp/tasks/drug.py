"""DRUG: a target SMILES in, the reactant SMILES and a pathway explanation out (Example 2).

MATCH is equality of the sets of canonical RDKit SMILES; an invalid SMILES from the
LLM is a format failure (the agent re-asks), never a silent mismatch. The few-shot
examples come from the dataset (config["few_shot"]: target, reactants, explanation).
Generator max tokens 1024 as in the papers' appendix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pxp.tasks.spec import TaskSpec, few_shots

SYSTEM = (
    "You are a synthetic chemist. Always give the SMILES strings of molecules.\n\n"
    "You will be asked to perform a retrosynthetic analysis of a target molecule and to give "
    "the last step of a feasible synthesis: the reactants (starting materials or key "
    "intermediates) that react in one step to give the target. Prefer commercially available "
    "or easily synthesizable reactants. Include considerations of regioselectivity, "
    "stereoselectivity and functional group compatibility as applicable, and give the "
    "reasoning behind the step from the principles of organic chemistry and synthetic "
    "strategy.\n\n"
    "Adhere to the below format and provide no extra text:\n{format}"
)
CHECKER = (
    "You are a retrosynthesis expert, with detailed knowledge of known retrosynthetic "
    "pathways and their procedures. Your task is to check whether two explanations of a "
    "retrosynthetic step are consistent with each other. Your answer must be the same if the "
    "two explanations are swapped. Respond only with Yes or No."
)


def drug_spec(config: Mapping[str, Any] | None = None) -> TaskSpec:
    """The DRUG task with the dataset's few-shot examples."""
    config = config or {}
    return TaskSpec(
        name="drug",
        match_kind="smiles",
        agree_kind="llm",
        system=SYSTEM,
        instance="Please perform a retrosynthetic analysis of {payload} and give the reactants "
                 "of the last step.",
        instance_short="target {payload}",
        prediction_field="Pathway",
        prediction_hint="<the reactant SMILES, separated by '.'>",
        explanation_field="Explanation",
        explanation_hint="<the reaction and the reasoning behind it>",
        checker=CHECKER,
        image=False,
        few_shot=few_shots(config.get("few_shot")),
        max_tokens=1024,
        expert="the chemist",
    )
