"""Prices of known models (USD per million tokens) for the cost of an LLMCall.

Matched by model id (a date or `-latest` suffix allowed); an unknown model has no cost (None), which
is the honest answer for local OpenAI-compatible servers. Anthropic cache writes
(5-minute) cost 1.25x input and cache reads 0.1x input; OpenAI cached input has
its own price. Update the table when list prices change; checked 2026-11-23 (CHECKED).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the date the prices below were checked against the providers' list prices
CHECKED = "2026-11-23"


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cache_read: float
    cache_write: float


def _claude(inp: float, out: float) -> Price:
    return Price(inp, out, round(inp * 0.1, 6), round(inp * 1.25, 6))


def _gpt(inp: float, out: float, cached: float) -> Price:
    return Price(inp, out, cached, inp)


PRICES: dict[tuple[str, str], Price] = {
    ("anthropic", "claude-opus-4-6"): _claude(5.0, 25.0),
    ("anthropic", "claude-opus-4-5"): _claude(5.0, 25.0),
    ("anthropic", "claude-opus-4-1"): _claude(15.0, 75.0),
    ("anthropic", "claude-opus-4"): _claude(15.0, 75.0),
    ("anthropic", "claude-sonnet-4-6"): _claude(3.0, 15.0),
    ("anthropic", "claude-sonnet-4-5"): _claude(3.0, 15.0),
    ("anthropic", "claude-sonnet-4"): _claude(3.0, 15.0),
    ("anthropic", "claude-3-7-sonnet"): _claude(3.0, 15.0),
    ("anthropic", "claude-3-5-sonnet"): _claude(3.0, 15.0),
    ("anthropic", "claude-haiku-4-5"): _claude(1.0, 5.0),
    ("anthropic", "claude-3-5-haiku"): _claude(0.8, 4.0),
    ("anthropic", "claude-3-haiku"): _claude(0.25, 1.25),
    ("openai", "gpt-4o-mini"): _gpt(0.15, 0.60, 0.075),
    ("openai", "gpt-4o"): _gpt(2.50, 10.0, 1.25),
    ("openai", "gpt-4.1-nano"): _gpt(0.10, 0.40, 0.025),
    ("openai", "gpt-4.1-mini"): _gpt(0.40, 1.60, 0.10),
    ("openai", "gpt-4.1"): _gpt(2.0, 8.0, 0.50),
}

_SUFFIX = re.compile(r"(-\d{4}-?\d{2}-?\d{2}|-\d{8}|-latest)?")


def price_of(provider: str, model: str) -> Price | None:
    """The price of a model id, also with a date or `-latest` suffix; None when unknown."""
    for (p, name), price in PRICES.items():
        if p == provider and model.startswith(name) and _SUFFIX.fullmatch(model[len(name):]):
            return price
    return None


def cost_usd(
    provider: str, model: str, *, tokens_in: int, tokens_out: int, cache_read: int = 0,
    cache_write: int = 0,
) -> float | None:
    """The cost of one call. `tokens_in` excludes cache reads and writes (Anthropic's
    usage convention; the OpenAI provider converts to it)."""
    price = price_of(provider, model)
    if price is None:
        return None
    total = (tokens_in * price.input + tokens_out * price.output
             + cache_read * price.cache_read + cache_write * price.cache_write)
    return round(total / 1_000_000, 8)
