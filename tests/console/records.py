"""Request records as an application logs them, for the console's browser tests."""

from __future__ import annotations

from typing import Any


def record(number: int, **fields: Any) -> dict[str, Any]:
    """A successful call of prompt ``support-reply``; ``fields`` override any part."""
    base: dict[str, Any] = {
        "id": f"req_console_{number:04d}",
        "created_at": "2026-11-24T09:15:00Z",
        "prompt_name": "support-reply",
        "version": 3,
        "model": "gpt-4o-mini",
        "provider": "openai",
        "status": "success",
        "input_variables": {"customer": "Ada", "question": "Where is my order?"},
        "output": {"content": "Hello Ada, your order ships today.", "finish_reason": "stop"},
        "metadata": {"user_id": "u-1", "env": "prod"},
        "usage": {"prompt_tokens": 100, "completion_tokens": 23, "estimated_cost_usd": 0.0012},
        "latency_ms": 842,
    }
    return base | fields


GALLERY = [
    record(1),
    record(
        2,
        created_at="2026-11-24T08:52:10Z",
        prompt_name="summarize-ticket",
        version=7,
        model="claude-3-5-haiku",
        provider="anthropic",
        status="error",
        error="provider timed out after 30 s",
        output=None,
        metadata={"user_id": "u-2", "env": "prod"},
        usage={"prompt_tokens": 1830, "completion_tokens": 0, "estimated_cost_usd": 0.0015},
        latency_ms=30012,
    ),
    record(
        3,
        created_at="2026-11-23T17:40:03Z",
        prompt_name="classify-intent",
        version=2,
        model="gpt-4o",
        metadata={"user_id": "u-2", "env": "staging"},
        usage={"prompt_tokens": 412, "completion_tokens": 5, "estimated_cost_usd": 0.00109},
        latency_ms=388,
    ),
    record(
        4,
        created_at="2026-11-22T11:05:44Z",
        metadata={"user_id": "u-3", "env": "prod"},
        usage={"prompt_tokens": 96, "completion_tokens": 41, "estimated_cost_usd": 0.000039},
        latency_ms=1204,
    ),
    record(
        5,
        created_at="2026-11-20T06:30:00Z",
        prompt_name="summarize-ticket",
        version=6,
        model="claude-3-5-haiku",
        provider="anthropic",
        metadata={"user_id": "u-1", "env": "prod"},
        usage={"prompt_tokens": 2210, "completion_tokens": 180, "estimated_cost_usd": 0.00249},
        latency_ms=2930,
    ),
]
