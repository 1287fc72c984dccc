"""Tasks: RAD, DRUG and config-defined tasks (prompts, MATCH, AGREE, parsing)."""
