"""LLM providers behind one small interface, chosen by `provider:model` (DESIGN §5).

Owns: the prompt/completion types (base), the Anthropic and OpenAI providers, the registry,
pricing, key handling and redaction, the shared call limit and the call journal interface.
May import: pxp.protocols only. It never imports storage: what a call cost is returned as a
plain record (agents.base.CallRecord) and stored by the caller (pxp.running).
"""
