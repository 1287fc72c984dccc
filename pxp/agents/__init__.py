"""Agents: the machine (LLM or simulated) and the human (database proxy or browser)."""
