"""What model calls cost: prices per million tokens, and a task's cost from its usage. Pure.

``llm.prices`` (model name -> input, output, cached input, cache write prices in US
dollars per million tokens) wins over the built-in list below, which holds the prices
the providers published for common hosted models (OpenAI's pricing page and Anthropic's
"Pricing" documentation, read in 2026; check them against your bill). A model found in
neither, such as a model served by Ollama, vLLM or llama.cpp on your own machines,
costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.config import Settings

MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens. Cached input defaults to the input price, as does
    a cache write (an endpoint without a prompt cache reports neither)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, prompt: int, completion: int, *, cached: int = 0, cache_write: int = 0) -> float:
        """The cost of ``prompt`` tokens (``cached`` and ``cache_write`` of them read from
        and written to the prompt cache) and ``completion`` tokens."""
        plain = max(0, prompt - cached - cache_write)
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        total = (
            plain * self.input
            + cached * cached_price
            + cache_write * write_price
            + completion * self.output
        )
        return total / MILLION


FREE = Price(0.0, 0.0, 0.0, 0.0)

# Model-name prefixes, the longest match wins (a dated name such as
# "claude-sonnet-4-20250514" or "gpt-4o-2024-08-06" matches its family).
PUBLISHED: dict[str, Price] = {
    # OpenAI: input, output, cached input.
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    # Anthropic: input, output, cache hits, 5-minute cache writes.
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),  # Opus 4 and 4.1
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-6": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-7": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-8": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-sonnet-5": Price(2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
}


def price_for(model: str, configured: Mapping[str, Price] | None = None) -> Price:
    """The price of ``model``: ``llm.prices`` by exact name, then the published list by
    the longest matching prefix, else free (a model on your own server)."""
    if configured and model in configured:
        return configured[model]
    name = model.lower().rsplit("/", 1)[-1]  # "anthropic/claude-sonnet-4" via a proxy
    matches = [prefix for prefix in PUBLISHED if name.startswith(prefix)]
    if not matches:
        return FREE
    return PUBLISHED[max(matches, key=len)]


def dollars(amount: float) -> str:
    """A cost as people read it: cents for most tasks, more digits for small ones."""
    if amount == 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount >= 0.01:
        return f"${amount:.3f}"
    return f"${amount:.4f}"


def model_price(settings: Settings) -> Price:
    """The price of the configured model (``llm.model``) under ``llm.prices``."""
    configured = {
        name: Price(p.input, p.output, p.cached_input, p.cache_write)
        for name, p in settings.llm.prices.items()
    }
    return price_for(settings.llm.model, configured)
