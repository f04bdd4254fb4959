"""One retry rule for every HTTP client promptrail has: the SDK's REST client, the capture
shipper, and the collector's provider client.

A retry waits what the server asked for (``Retry-After`` in seconds, capped), else an
exponential backoff with equal jitter: the wait before retry ``n`` (1-based) is drawn from the
upper half of ``min(ceiling, base * 2**(n-1))``, so a herd of clients that failed together
spreads out, and none retries sooner than half the backoff. Which failures are worth a retry
differs by client and stays with each (a REST POST is never retried; a provider call only
before its first byte; the shipper's records carry ids, so any of its posts may be resent).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx


def retry_after(response: httpx.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds; None when absent or an HTTP date."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from the collector or a model API; backoff instead


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before each retry: ``base`` and ``ceiling`` of the jittered backoff,
    and the longest ``Retry-After`` honoured (a longer one is capped to it)."""

    base: float
    ceiling: float
    retry_after_max: float

    def backoff(self, attempt: int) -> float:
        """The pause before retry ``attempt`` (1-based): exponential, equal jitter."""
        window = min(self.ceiling, self.base * 2 ** (attempt - 1))
        return random.uniform(window / 2, window)

    def pause(self, asked: float | None, attempt: int) -> float:
        """The pause before retry ``attempt``: what the server ``asked`` (capped), else backoff."""
        return self.backoff(attempt) if asked is None else min(asked, self.retry_after_max)
