"""What genai-prices charges for a call, with and without its token details (the reference the
pricing tests compare with).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from genai_prices import Usage, calc_price

AT = datetime(2026, 11, 2, 10, tzinfo=UTC)


def list_price(model: str, at: datetime = AT, **counts: int) -> float:
    """What genai-prices itself charges for the call (the reference)."""
    return float(calc_price(Usage(**counts), model, genai_request_timestamp=at).total_price)


def priced_with_details(
    model: str, usage: dict[str, Any], at: datetime = AT
) -> tuple[float, float]:
    """genai-prices' cost of a detail's ``usage`` with its token details, and without them."""
    tokens = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    with_details = list_price(
        model,
        at,
        **tokens,
        cache_read_tokens=usage["cached_tokens"],
        cache_write_tokens=usage["cache_write_tokens"],
        output_reasoning_tokens=usage["reasoning_tokens"],
    )
    return with_details, list_price(model, at, **tokens)
