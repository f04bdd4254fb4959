"""Feedback tokens made in the process, with no round trip to the collector.

A token lets an end user's browser post one score on one record or trace, without an API key
(``POST /v1/feedback/{token}``). The SDK holds the raw key and signs the token with the same
codec the collector checks it with (:mod:`._feedback_token`; docs/security.md says how).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ._feedback_token import (
    DEFAULT_TTL_SECONDS,
    MAX_TTL_SECONDS,
    TokenScope,
    encode,
    key_hash,
    key_id,
    new_score_id,
)
from ._score_rules import DATA_TYPES, name_problem, target_problem

__all__ = ["DATA_TYPES", "DEFAULT_TTL_SECONDS", "mint", "name_problem", "target_problem"]


def mint(
    api_key: str,
    name: str,
    *,
    request_id: str | None = None,
    trace_id: str | None = None,
    data_type: str | None = None,
    categories: Sequence[str] | None = None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: float | None = None,
) -> str:
    """Return a feedback token signed with ``api_key``; raise ValueError on bad arguments."""
    problem = (
        name_problem(name)
        or target_problem(request_id, trace_id)
        or _ttl_problem(ttl_seconds)
        or _type_problem(data_type, categories)
    )
    if problem:
        raise ValueError(f"promptrail.feedback_token: {problem}")
    if not api_key:
        raise ValueError(
            "promptrail.feedback_token: no API key (pass init(api_key=...) or set "
            "PROMPTRAIL_API_KEY): a token is signed with it"
        )
    digest = key_hash(api_key)
    scope = TokenScope(
        key_id=key_id(digest),
        request_id=request_id,
        trace_id=trace_id,
        name=name,
        data_type=data_type,
        categories=list(categories) if categories is not None else None,
        expires=int(time.time() if now is None else now) + ttl_seconds,
        score_id=new_score_id(),
    )
    return encode(scope, digest)


def _ttl_problem(ttl_seconds: object) -> str | None:
    if (
        not isinstance(ttl_seconds, int)
        or isinstance(ttl_seconds, bool)
        or not 1 <= ttl_seconds <= MAX_TTL_SECONDS
    ):
        return f"ttl_seconds must be a whole number from 1 to {MAX_TTL_SECONDS}"
    return None


def _type_problem(data_type: object, categories: Sequence[str] | None) -> str | None:
    if data_type is not None and data_type not in DATA_TYPES:
        return f"data_type must be one of {', '.join(DATA_TYPES)}"
    if categories is not None and (
        isinstance(categories, str)
        or not categories
        or not all(isinstance(category, str) and category for category in categories)
    ):
        return "categories must be a non-empty list of non-empty strings"
    return None
