"""Arbitrary JSON on the connections' write routes is never a 5xx: each 4xx is the contract's
error body, and a refused write changes nothing. Bodies are built from valid ones with fields
replaced by odd values (NaN and Infinity literals, lone surrogates, NUL, integers past 64 bits,
deep nesting, link-local URLs)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given

from tests.fuzz_bodies import FUZZ, body_of, json_values, send, taken

VALUES = json_values("http://169.254.169.254/", "http://[fe80::1]/", "ftp://x", "Authorization")
CONNECTION = {
    "name": "fuzz",
    "provider": "openai_compatible",
    "api_key": "sk-fuzz-key-0001",
    "base_url": "http://127.0.0.1:9/v1",
    "models": ["llama"],
    "headers": {"X-A": "b"},
    "monthly_budget_usd": 5,
}


@FUZZ
@given(body=body_of(CONNECTION, VALUES))
def test_connection_create(api: TestClient, body: Any) -> None:
    before = api.get("/v1/connections").json()["data"]
    if taken(send(api, "POST", "/v1/connections", body)):
        assert api.delete(f"/v1/connections/{body['name']}").status_code == 200
    else:
        assert api.get("/v1/connections").json()["data"] == before


@FUZZ
@given(body=body_of({k: v for k, v in CONNECTION.items() if k != "name"}, VALUES))
def test_connection_patch(api: TestClient, body: Any) -> None:
    if api.get("/v1/connections/base").status_code == 404:
        made = api.post("/v1/connections", json={**CONNECTION, "name": "base"})
        assert made.status_code == 201, made.text
    before = api.get("/v1/connections/base").json()["data"]
    if not taken(send(api, "PATCH", "/v1/connections/base", body)):
        assert api.get("/v1/connections/base").json()["data"] == before
