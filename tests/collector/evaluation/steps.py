"""Steps the online-evaluation tests take over HTTP."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def put_evaluator(api: TestClient, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """PUT an evaluator; check the 200; return its ``data``."""
    response = api.put(f"/v1/evaluators/{name}", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def create_rule(api: TestClient, **fields: Any) -> dict[str, Any]:
    """POST a rule (judging records with ``exact`` unless told); check the 201; return it."""
    body = {"name": "exact on answers", "evaluator": "exact", "target": "record", **fields}
    response = api.post("/v1/evaluation-rules", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data
