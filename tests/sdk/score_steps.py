"""Steps the SDK's score tests share: the scores the collector stores, and which scores the
SDK drops beside which the collector's batch route refuses."""

from __future__ import annotations

from typing import Any

import httpx

import promptrail
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY


def stored_scores(base_url: str, **query: str) -> list[dict[str, Any]]:
    """The scores ``GET /v1/scores`` lists for ``query`` (up to 100)."""
    answer = httpx.get(
        f"{base_url}/v1/scores", params={"limit": 100, **query}, headers=DEFAULT_AUTH
    )
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def drops_and_refusals(
    live_url: str, edges: list[dict[str, Any]], prefix: str
) -> tuple[list[bool], set[int]]:
    """Score each of ``edges`` through the SDK and post them all to the batch route: whether
    the SDK dropped each as invalid, and the indexes the collector refused."""
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)
    dropped_by_sdk: list[bool] = []
    for n, edge in enumerate(edges):
        before = promptrail.stats()["scores"]["dropped"].get("invalid", 0)
        promptrail.score(**{"id": f"{prefix}-{n}", **edge})
        dropped_by_sdk.append(promptrail.stats()["scores"]["dropped"].get("invalid", 0) > before)
    assert promptrail.flush(timeout=10)

    answer = httpx.post(
        f"{live_url}/v1/scores/batch",
        json={"scores": [{"id": f"{prefix}-wire-{n}", **edge} for n, edge in enumerate(edges)]},
        headers=DEFAULT_AUTH,
    )
    assert answer.status_code == 201, answer.text
    return dropped_by_sdk, {r["index"] for r in answer.json()["data"]["rejected"]}
