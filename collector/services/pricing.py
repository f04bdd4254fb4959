"""Estimated cost of a model call from its token usage, priced by ``genai-prices``.

``genai-prices`` is pydantic's maintained price list of LLM APIs (dated snapshots of a model,
like ``gpt-4o-mini-2024-07-18``, price as the model; prices carry their validity dates, so a
call is priced at the rates of its own time). A model it does not know costs 0 and the record
says ``cost_known = false``: a local model behind an OpenAI-compatible server has no list
price, and a guess would be worse than a flag.

Every priced path uses :class:`GenaiPriceBook`: runs, and at ingest every record that arrives
without a cost (``POST /v1/requests``, the batch route the SDK ships through, OTLP). Ingest
prices many records a second, and ``genai-prices`` takes ~100 µs to price one call (model
lookup, then Decimal arithmetic over its unit registry), about what storing a record costs.
So the book remembers, per model and price period, the cost of a million tokens of each kind
(probed once through ``genai-prices`` itself) and prices a record as their weighted sum: the
same number, since a price without tiers is linear in the token counts. Tiered prices (the
rate depends on the request's input size) are priced call by call.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from genai_prices import Usage, data_snapshot
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices

logger = logging.getLogger("promptrail.pricing")

_PROBE = 1_000_000


class PriceBook(Protocol):
    """Prices model calls."""

    def cost(
        self,
        provider: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
        at: datetime | None = None,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price."""
        ...


@dataclass(frozen=True)
class _Rates:
    """USD per token of each kind under one price (cache and reasoning: the whole token)."""

    prompt: float
    cached: float
    cache_write: float
    completion: float
    reasoning: float


@dataclass(frozen=True)
class _Model:
    """A priced model: its rates when they never change, else what finds them at a time."""

    info: ModelInfo
    rates: _Rates | None


class GenaiPriceBook:
    """Prices from ``genai-prices``' bundled data (no network access)."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, str], _Model | None] = {}
        # Keyed by the price object itself (one per model and period in the price data).
        self._rates: dict[int, tuple[ModelPrice, _Rates | None]] = {}
        self._lock = threading.Lock()

    def cost(
        self,
        provider: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
        at: datetime | None = None,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """Return the estimated cost in USD, or None when the model has no known price.

        ``provider`` may be empty: it is then inferred from the model (``openai/gpt-4o``
        names it; otherwise ``genai-prices`` matches the model name). ``cached_tokens`` are
        prompt tokens read from the provider's prompt cache and ``reasoning_tokens``
        completion tokens spent reasoning: both are counted inside ``prompt_tokens`` and
        ``completion_tokens`` (OpenAI's convention and OpenTelemetry's), and so are
        ``cache_write_tokens``, prompt tokens written to the cache (Anthropic's
        ``cache_creation_input_tokens``, priced at their own rate). ``at``: the call's
        time (prices have validity dates); default now.

        >>> GenaiPriceBook().cost("openai", "gpt-4o-mini", 1000, 100)
        0.00021
        """
        try:
            found = self._models.get((provider, model), _UNSEEN)
            if found is _UNSEEN:
                found = self._model(provider, model)
            if found is None:
                return None
            assert isinstance(found, _Model)
            rates = found.rates
            if rates is None:
                price = found.info.get_prices(at or datetime.now(UTC))
                rates = self._rates_of(price)
                if rates is None:
                    counts = (prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens)
                    usage = _usage(*counts, cache_write=cache_write_tokens)
                    return float(price.calc_price(usage)["total_price"])
            total = prompt_tokens * rates.prompt + completion_tokens * rates.completion
            if cached_tokens or reasoning_tokens or cache_write_tokens:
                cached = min(cached_tokens, prompt_tokens)
                written = min(cache_write_tokens, prompt_tokens - cached)
                reasoning = min(reasoning_tokens, completion_tokens)
                total += (
                    cached * (rates.cached - rates.prompt)
                    + written * (rates.cache_write - rates.prompt)
                    + reasoning * (rates.reasoning - rates.completion)
                )
            # The sum of float rates is off by ~1e-19 USD; pico-dollars are exact enough.
            return round(total, 12)
        except Exception:  # a pricing bug must never fail a run or drop a record
            logger.exception("genai-prices could not price %s/%s", provider, model)
            return None

    def _model(self, provider: str, model: str) -> _Model | None:
        found = _find_model(provider, model)
        entry = None
        if found is not None:
            info = found[1]
            # A single price with no dated conditions holds at every time: its rates are
            # the model's for good, with no lookup per call.
            prices = info.prices
            entry = _Model(info, self._rates_of(prices) if isinstance(prices, ModelPrice) else None)
        with self._lock:
            if len(self._models) > 10_000:  # model names are client-sent: bound the memory
                self._models.clear()
            self._models[(provider, model)] = entry
        return entry

    def _rates_of(self, price: ModelPrice) -> _Rates | None:
        cached = self._rates.get(id(price))
        if cached is not None and cached[0] is price:
            return cached[1]
        tiered = any(isinstance(value, TieredPrices) for value in vars(price).values())
        rates = None if tiered else _probe(price)
        with self._lock:
            self._rates[id(price)] = (price, rates)
        return rates


_UNSEEN = object()


def _find_model(provider: str, model: str) -> tuple[Provider, ModelInfo] | None:
    """Return the price list's provider and model, or None when it has no price for them."""
    prefix, _, rest = model.partition("/")
    if not provider and rest:
        # `openai/gpt-4o` names its provider, as runs accept it (docs/api-notes.md, "Runs").
        found = _find_model(prefix, rest)
        if found is not None:
            return found
    if not model:
        return None
    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, provider or None, None)
    except LookupError:
        return None


def _probe(price: ModelPrice) -> _Rates:
    """Ask ``genai-prices`` the cost of a million tokens of each kind under ``price``."""

    def per_token(**counts: int) -> float:
        return float(price.calc_price(Usage(**counts))["total_price"]) / _PROBE

    return _Rates(
        prompt=per_token(input_tokens=_PROBE),
        cached=per_token(input_tokens=_PROBE, cache_read_tokens=_PROBE),
        cache_write=per_token(input_tokens=_PROBE, cache_write_tokens=_PROBE),
        completion=per_token(output_tokens=_PROBE),
        reasoning=per_token(output_tokens=_PROBE, output_reasoning_tokens=_PROBE),
    )


def _usage(prompt: int, completion: int, cached: int, reasoning: int, cache_write: int) -> Usage:
    # genai-prices counts cache reads and writes inside input_tokens, as prompt_tokens does.
    read = min(cached, prompt)
    counts = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "cache_read_tokens": read,
        "cache_write_tokens": min(cache_write, prompt - read),
        "output_reasoning_tokens": min(reasoning, completion),
    }
    return Usage(**{key: value for key, value in counts.items() if value})
