"""Estimated cost of a model call from its token usage.

The price data comes from ``genai-prices`` (pydantic's maintained price list) when that
package is installed, and otherwise from the small built-in table below (list prices of the
common OpenAI and Anthropic models, USD per million tokens, as published in 2025). A model
neither knows costs 0 and its record says ``cost_known = false``: a local model served by an
OpenAI-compatible server has no list price, and a guess would be worse than a flag.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

logger = logging.getLogger("promptrail.pricing")

_MILLION = 1_000_000
# Dated snapshots and aliases of a priced model cost what the model costs:
# gpt-4o-mini-2024-07-18, claude-sonnet-4-20250514, gpt-4-0613, claude-3-7-sonnet-latest.
_SNAPSHOT = re.compile(r"^(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{4}|-0|-latest)?$")


@dataclass(frozen=True)
class ModelPrice:
    """List price of a model, USD per million tokens."""

    input_per_million: float
    output_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Return the cost of a call with these token counts."""
        return (
            prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million
        ) / _MILLION


BUILTIN_PRICES: dict[str, dict[str, ModelPrice]] = {
    "openai": {
        "gpt-5": ModelPrice(1.25, 10.0),
        "gpt-5-mini": ModelPrice(0.25, 2.0),
        "gpt-5-nano": ModelPrice(0.05, 0.40),
        "gpt-4.1": ModelPrice(2.0, 8.0),
        "gpt-4.1-mini": ModelPrice(0.40, 1.60),
        "gpt-4.1-nano": ModelPrice(0.10, 0.40),
        "gpt-4o": ModelPrice(2.50, 10.0),
        "gpt-4o-mini": ModelPrice(0.15, 0.60),
        "gpt-4-turbo": ModelPrice(10.0, 30.0),
        "gpt-4": ModelPrice(30.0, 60.0),
        "gpt-3.5-turbo": ModelPrice(0.50, 1.50),
        "o1": ModelPrice(15.0, 60.0),
        "o1-mini": ModelPrice(1.10, 4.40),
        "o3": ModelPrice(2.0, 8.0),
        "o3-mini": ModelPrice(1.10, 4.40),
        "o4-mini": ModelPrice(1.10, 4.40),
    },
    "anthropic": {
        "claude-opus-4-5": ModelPrice(5.0, 25.0),
        "claude-opus-4-1": ModelPrice(15.0, 75.0),
        "claude-opus-4": ModelPrice(15.0, 75.0),
        "claude-sonnet-4-5": ModelPrice(3.0, 15.0),
        "claude-sonnet-4": ModelPrice(3.0, 15.0),
        "claude-haiku-4-5": ModelPrice(1.0, 5.0),
        "claude-3-7-sonnet": ModelPrice(3.0, 15.0),
        "claude-3-5-sonnet": ModelPrice(3.0, 15.0),
        "claude-3-5-haiku": ModelPrice(0.80, 4.0),
        "claude-3-opus": ModelPrice(15.0, 75.0),
        "claude-3-haiku": ModelPrice(0.25, 1.25),
    },
}


class PriceBook(Protocol):
    """Prices model calls."""

    def cost(
        self, provider: str, model: str, prompt_tokens: int, completion_tokens: int
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price."""
        ...


class BuiltinPriceBook:
    """Prices from :data:`BUILTIN_PRICES`; a dated snapshot costs what its model costs."""

    def __init__(self, prices: dict[str, dict[str, ModelPrice]] | None = None) -> None:
        self._prices = BUILTIN_PRICES if prices is None else prices

    def price(self, provider: str, model: str) -> ModelPrice | None:
        """Return the list price of a provider's model, or None."""
        table = self._prices.get(provider, {})
        matches = [
            name for name in table if model.startswith(name) and _SNAPSHOT.match(model[len(name) :])
        ]
        return table[max(matches, key=len)] if matches else None

    def cost(
        self, provider: str, model: str, prompt_tokens: int, completion_tokens: int
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price."""
        price = self.price(provider, model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)


class GenaiPriceBook:
    """Prices from the ``genai-prices`` package (``calc_price``), when it is installed."""

    def __init__(self) -> None:
        # Imported by name: the package is optional, and absent from type-checking runs.
        self._module: Any = importlib.import_module("genai_prices")

    def cost(
        self, provider: str, model: str, prompt_tokens: int, completion_tokens: int
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price."""
        usage = self._module.Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens)
        try:
            price = self._module.calc_price(usage, model_ref=model, provider_id=provider)
        except LookupError:
            return None
        except Exception:  # a pricing bug must never fail a run
            logger.exception("genai-prices could not price %s/%s", provider, model)
            return None
        return float(price.total_price)


def default_price_book() -> PriceBook:
    """Return genai-prices when installed, else the built-in table."""
    if importlib.util.find_spec("genai_prices") is not None:
        return GenaiPriceBook()
    return BuiltinPriceBook()
