"""``POST /v1/connections/{name}/check``: one minimal call, and what its answer means.

The call is the cheapest one that goes through the provider's authentication and billing: a
one-token completion of the connection's first model (else the provider's small default), or
``GET /models`` for an ``openai_compatible`` connection that lists no model. It is not logged
and not counted in the connection's spend (docs/api-notes.md, Connections).

How each provider says what went wrong, on the wire:

- a bad key: HTTP 401 (both; Anthropic ``authentication_error``), or 403
  (``permission_error``): ``auth_invalid``;
- no money left: OpenAI answers 429 with ``error.code`` (or ``type``) ``insufficient_quota``;
  Anthropic 402 ``billing_error``, or 400 ``invalid_request_error`` whose message says "Your
  credit balance is too low": ``quota_exceeded``. A plain 429 (rate limit) is an ``error``;
- no answer (refused, timed out, no such host, TLS failure): ``unreachable``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from ...providers.anthropic import API_VERSION
from ...providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from ...providers.openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from ...store.connections import ConnectionRow

CheckStatus = Literal["ok", "auth_invalid", "unreachable", "quota_exceeded", "error"]
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}
_TIMEOUT = httpx.Timeout(connect=5.0, read=20.0, write=20.0, pool=5.0)
_MAX_MESSAGE = 300


@dataclass(frozen=True)
class CheckResult:
    """What the check found."""

    ok: bool
    status: CheckStatus
    message: str
    latency_ms: int


async def check_connection(
    row: ConnectionRow, api_key: str, headers: dict[str, str], timeout: httpx.Timeout = _TIMEOUT
) -> CheckResult:
    """Make the connection's minimal call and classify its answer."""
    method, url, sent_headers, body = _request(row, api_key, headers)
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            response = await client.request(method, url, headers=sent_headers, json=body)
    except httpx.HTTPError as exc:
        return CheckResult(
            False,
            "unreachable",
            f"cannot reach {httpx.URL(url).host}: {type(exc).__name__}",
            _since(started),
        )
    latency = _since(started)
    status, message = _classify(response)
    hidden = [s for s in (api_key, *headers.values()) if len(s) >= 4]
    for secret in hidden:
        message = message.replace(secret, "[redacted]")
    return CheckResult(status == "ok", status, message, latency)


def _since(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))


def _request(
    row: ConnectionRow, api_key: str, headers: dict[str, str]
) -> tuple[str, str, dict[str, str], dict[str, Any] | None]:
    model = row.models[0] if row.models else DEFAULT_MODELS.get(row.provider)
    ping = [{"role": "user", "content": "ping"}]
    if row.provider == "anthropic":
        base = row.base_url or ANTHROPIC_BASE_URL
        sent = {**headers, "x-api-key": api_key, "anthropic-version": API_VERSION}
        return (
            "POST",
            f"{base}/v1/messages",
            sent,
            {
                "model": model,
                "max_tokens": 1,
                "messages": ping,
            },
        )
    base = row.base_url or OPENAI_BASE_URL
    sent = {**headers, "Authorization": f"Bearer {api_key}"}
    if model is None:
        return "GET", f"{base}/models", sent, None
    # OpenAI's own models take max_completion_tokens (its reasoning models refuse max_tokens);
    # the servers speaking its wire know max_tokens.
    limit = "max_completion_tokens" if row.provider == "openai" else "max_tokens"
    return "POST", f"{base}/chat/completions", sent, {"model": model, limit: 1, "messages": ping}


def _classify(response: httpx.Response) -> tuple[CheckStatus, str]:
    code = response.status_code
    if response.is_success:
        return "ok", f"the provider answered (HTTP {code})"
    error = _error_of(response)
    kind = " ".join(str(error.get(k) or "") for k in ("type", "code")).lower()
    said = str(error.get("message") or "")[:_MAX_MESSAGE]
    if code in (401, 403):
        return "auth_invalid", f"the provider refused the API key (HTTP {code})"
    if (
        code == 402
        or "insufficient_quota" in kind
        or "billing" in kind
        or "credit balance" in said.lower()
    ):
        return "quota_exceeded", f"the account has no quota or credit left (HTTP {code}): {said}"
    if code == 429:
        return "error", f"rate limited (HTTP 429): {said}"
    return "error", f"HTTP {code}" + (f": {said}" if said else "")


def _error_of(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = json.loads(response.content[:65536])
    except ValueError:
        return {"message": response.text[:_MAX_MESSAGE]}
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return error
    return {"message": str(error or "")}
