"""Feedback tokens made in the process, with no round trip to the collector.

A token lets an end user's browser post one score on one record or trace, without an API key
(``POST /v1/feedback/{token}``). The collector checks it with what it stores of the key (its
SHA-256), so the SDK, holding the raw key, signs it the same way (the format is shared with
``collector/services``; docs/security.md says how it is checked)::

    secret  = HMAC-SHA256(bytes.fromhex(sha256(key)), b"promptrail feedback token v1")
    payload = {"v":1,"k":"key_"+sha256(key)[:12],"r":..,"t":..,"n":..,"d":..,"c":..,"e":..,"i":..}
    token   = "pft_" + b64url(payload) + "." + b64url(HMAC-SHA256(secret, "pft_" + b64url(payload)))

(base64url without padding; the payload is compact JSON in that key order.)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Sequence

PREFIX = "pft_"
_CONTEXT = b"promptrail feedback token v1"
DEFAULT_TTL_SECONDS = 86_400
MAX_TTL_SECONDS = 2_592_000
DATA_TYPES = ("numeric", "boolean", "categorical")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def b64url(data: bytes) -> str:
    """base64url without the ``=`` padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def key_hash(api_key: str) -> str:
    """The SHA-256 of a key, in hex: what the collector stores instead of the key."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def signing_secret(api_key: str) -> bytes:
    """The key's token secret, derived from its hash (so the collector can derive it too)."""
    return hmac.new(bytes.fromhex(key_hash(api_key)), _CONTEXT, hashlib.sha256).digest()


def new_score_id() -> str:
    """A fresh ``score_<32 hex>`` id."""
    return "score_" + secrets.token_hex(16)


def target_problem(request_id: str | None, trace_id: str | None) -> str | None:
    """Why a (request_id, trace_id) pair names no single record or trace, or None if it does."""
    if (request_id is None) == (trace_id is None):
        return "give exactly one of request_id and trace_id"
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        return "request_id must be a non-empty string"
    if trace_id is not None and not (isinstance(trace_id, str) and _TRACE_ID.fullmatch(trace_id)):
        return "trace_id must be 32 lowercase hex characters"
    return None


def name_problem(name: object) -> str | None:
    """Why ``name`` is no score name (1-100 characters), or None."""
    if not isinstance(name, str) or not 1 <= len(name) <= 100:
        return "name must be a string of 1 to 100 characters"
    return None


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
    expires = int(time.time() if now is None else now) + ttl_seconds
    payload = {
        "v": 1,
        "k": "key_" + key_hash(api_key)[:12],
        "r": request_id,
        "t": trace_id,
        "n": name,
        "d": data_type,
        "c": list(categories) if categories is not None else None,
        "e": expires,
        "i": new_score_id(),
    }
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    signed = PREFIX + b64url(text.encode())
    mac = hmac.new(signing_secret(api_key), signed.encode(), hashlib.sha256).digest()
    return signed + "." + b64url(mac)


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
