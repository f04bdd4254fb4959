"""Hostile input the bad-input tests send: labels and names no path may hold, control
characters, a prompt's versions read back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

CONTROL = {
    "name": "control",
    "template": "Control {x}",
    "model": "gpt-4o",
    "description": "the control prompt",
    "parameters": {"temperature": 0.5, "max_tokens": 64},
    "tags": ["control"],
    "folder": "/control",
    "labels": ["production"],
}


def versions(api: TestClient, name: str) -> list[dict[str, Any]]:
    """A prompt's versions as the versions list answers them."""
    response = api.get(f"/v1/prompts/{quote(name, safe='')}/versions")
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def labels(api: TestClient, name: str) -> dict[str, int]:
    """A prompt's labels and the version each points at."""
    response = api.get(f"/v1/prompts/{quote(name, safe='')}/labels")
    assert response.status_code == 200, response.text
    return {item["label"]: item["version"] for item in response.json()["data"]}


BAD_LABELS = [
    "bad label",
    "x" * 65,
    "-leading",
    ".leading",
    "émoji😀",
    "'; DROP TABLE prompt_labels; --",
    "tab\tlabel",
]
