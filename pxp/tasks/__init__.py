"""Tasks (DESIGN §5): RAD, DRUG and config-defined tasks: prompts, MATCH, AGREE, reply parsing.

May import: llm (the reply schema), protocols; never storage, agents, running or the interfaces.
"""
