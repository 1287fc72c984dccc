"""The provider registry: a `provider:model` spec to the SDK-backed provider (DESIGN §5).

It sits above llm/base and the providers, so that neither imports the other in a circle.
"""

from __future__ import annotations

from pxp.llm.anthropic import AnthropicProvider
from pxp.llm.base import PROVIDERS, LLMConfigError, Provider, ProviderOptions, parse_spec
from pxp.llm.openai import OpenAIProvider


def make_provider(spec: str, options: ProviderOptions | None = None) -> Provider:
    """The provider a `provider:model` spec names, built with the SDK's settings."""
    name, model = parse_spec(spec)
    options = options or ProviderOptions()
    if name == "anthropic":
        return AnthropicProvider(model, options)
    if name == "openai":
        return OpenAIProvider(model, options)
    raise LLMConfigError(f"unknown provider {name!r} in {spec!r} (use {' or '.join(PROVIDERS)})")
