"""The collector starts on the embedded store and says so."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_health_needs_no_key_and_reports_ok(api: TestClient) -> None:
    response = api.get("/health", headers={"Authorization": ""})

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
