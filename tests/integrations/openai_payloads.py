"""Bodies the OpenAI wire-format stubs answer with: a Responses API response as the real API sends
it.
"""

from __future__ import annotations

RESPONSE = {
    "id": "resp_123",
    "object": "response",
    "created_at": 1735689600,
    "status": "completed",
    "model": "gpt-4o-mini-2024-07-18",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Bonjour, tester.", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 9,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 13,
    },
}
