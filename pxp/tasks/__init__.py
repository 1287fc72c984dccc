"""Tasks: RAD, DRUG and config-defined tasks (prompts, MATCH, AGREE, parsing)."""

from __future__ import annotations

from typing import Any


def prompt_templates(task: str) -> dict[str, Any]:
    """The prompt templates of a built-in task (stored with an experiment's config)."""
    from pxp.tasks.drug import drug_spec
    from pxp.tasks.rad import rad_spec

    spec = {"rad": rad_spec, "drug": drug_spec}.get(task)
    if spec is None:
        return {}
    s = spec()
    return {
        "system": s.system, "instance": s.instance, "checker": s.checker,
        "format": s.format_block(), "generator_max_tokens": s.max_tokens,
    }
