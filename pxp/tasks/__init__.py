"""Tasks (DESIGN §5–6): RAD, DRUG and config-defined tasks: prompts, MATCH, AGREE, reply parsing.

May import: llm (the reply schema), data (molecules), protocols; never agents, running, analysis
or the interfaces.
"""
