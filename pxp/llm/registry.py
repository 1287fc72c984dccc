"""The provider registry: a `provider:model` spec to the SDK-backed provider (DESIGN §5).

It sits above llm/base and the providers, so that neither imports the other in a circle. A provider's SDK is
imported when a provider is made, not with this module: the app's pages import it, and the two SDKs took two seconds
of a server's first page (docs/development.md, Benchmarks).
"""

from __future__ import annotations

from pxp.llm.base import PROVIDERS, LLMConfigError, Provider, ProviderOptions, parse_spec


def make_provider(spec: str, options: ProviderOptions | None = None) -> Provider:
    """The provider a `provider:model` spec names, built with the SDK's settings."""
    name, model = parse_spec(spec)
    options = options or ProviderOptions()
    if name == "anthropic":
        from pxp.llm.anthropic import AnthropicProvider

        return AnthropicProvider(model, options)
    if name == "openai":
        from pxp.llm.openai import OpenAIProvider

        return OpenAIProvider(model, options)
    raise LLMConfigError(f"unknown provider {name!r} in {spec!r} (use {' or '.join(PROVIDERS)})")
