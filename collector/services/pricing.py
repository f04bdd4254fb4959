"""Estimated cost of a model call from its token usage, priced by ``genai-prices``.

``genai-prices`` is pydantic's maintained price list of LLM APIs (dated snapshots of a model,
like ``gpt-4o-mini-2024-07-18``, price as the model; prices carry their validity dates, so a
run is priced at the rates of its own time). A model it does not know costs 0 and the record
says ``cost_known = false``: a local model behind an OpenAI-compatible server has no list
price, and a guess would be worse than a flag.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Protocol

from genai_prices import Usage, calc_price

logger = logging.getLogger("promptrail.pricing")


class PriceBook(Protocol):
    """Prices model calls."""

    def cost(
        self,
        provider: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        at: datetime | None = None,
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price."""
        ...


class GenaiPriceBook:
    """Prices from ``genai-prices``' bundled data (no network access)."""

    def cost(
        self,
        provider: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        at: datetime | None = None,
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price.

        >>> GenaiPriceBook().cost("openai", "gpt-4o-mini", 1000, 100)
        0.00021
        """
        usage = Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens)
        try:
            price = calc_price(usage, model, provider_id=provider, genai_request_timestamp=at)
        except LookupError:
            return None
        except Exception:  # a pricing bug must never fail a run
            logger.exception("genai-prices could not price %s/%s", provider, model)
            return None
        return float(price.total_price)
