"""Arbitrary JSON on the access routes' writes (sign-in, keys, protected labels, members) is
never a 5xx: each 4xx is the contract's error body, and a refused write changes nothing."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given

from tests.fuzz_bodies import FUZZ, body_of, send, taken

LABELS = "/v1/projects/default/protected-labels"


@FUZZ
@given(body=body_of({"email": "nobody@example.com", "password": "a long password"}))
def test_sign_in(api: TestClient, body: Any) -> None:
    response = send(api, "POST", "/v1/auth/login", body)
    assert not taken(response)  # no such user: never a session
    assert "set-cookie" not in response.headers


@FUZZ
@given(body=body_of({"scopes": ["ingest", "prompts:read"], "expires_in": "90d", "name": "app"}))
def test_key_create(api: TestClient, body: Any) -> None:
    before = _keys(api)
    if not taken(send(api, "POST", "/v1/keys", body)):
        assert _keys(api) == before


def _keys(api: TestClient) -> list[str]:
    # The caller's own key is used by the read itself: its last use moves, nothing else.
    return [key["key_id"] for key in api.get("/v1/keys").json()["data"]]


@FUZZ
@given(body=body_of({"labels": ["production"]}))
def test_protected_labels(api: TestClient, body: Any) -> None:
    before = api.get(LABELS).json()["data"]
    if not taken(send(api, "PUT", LABELS, body)):
        assert api.get(LABELS).json()["data"] == before


@FUZZ
@given(body=body_of({"role": "viewer"}))
def test_member_put(api: TestClient, body: Any) -> None:
    # No such user: a taken body would be a bug, a refusal is a 4xx of the contract.
    response = send(api, "PUT", "/v1/projects/default/members/nobody@example.com", body)
    assert not taken(response)
