"""LLM providers behind one small interface, chosen by `provider:model` (DESIGN §5)."""

from pxp.llm.base import (
    Completion,
    ImagePart,
    LLMConfigError,
    LLMError,
    Prompt,
    Provider,
    ProviderOptions,
    Schema,
    TextPart,
    Turn,
    is_llm_spec,
    make_provider,
    parse_spec,
)

__all__ = [
    "Completion",
    "ImagePart",
    "LLMConfigError",
    "LLMError",
    "Prompt",
    "Provider",
    "ProviderOptions",
    "Schema",
    "TextPart",
    "Turn",
    "is_llm_spec",
    "make_provider",
    "parse_spec",
]
