"""Agents (DESIGN §5): the machine (LLM or simulated) and the human (database proxy or browser).

Owns: the agent interface and what a decision returns (`base`: messages, CallRecord plain
records of each LLM call), the LLM machine, the simulated machine, the human proxy and the
checker. May import: tasks, llm, protocols, and storage's record types (CallCost) only; an
agent never opens a database (the caller stores what it returns). Never running, analysis or
the interfaces.
"""
