"""End-user feedback tokens (docs/api-notes.md, "Scores and feedback", issue 31 point 3) through
HTTP against the real store."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.services import feedback_tokens
from promptrail.collector.services.feedback_tokens import TokenScope
from promptrail.collector.services.keys import hash_key, key_id
from tests.collector.scores.steps import assert_error, fresh
from tests.keys import DEFAULT_KEY


def mint(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/v1/scores/tokens", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def keyless(api: TestClient) -> TestClient:
    """A client of the same collector that sends no key at all (a browser)."""
    return TestClient(api.app)


def test_a_token_posts_an_end_user_vote_without_a_key_and_again_replaces_it(
    scores_api: TestClient,
) -> None:
    record = fresh()
    token = mint(scores_api, request_id=record, name="thumb", ttl_seconds=600)
    assert token["url"] == f"/v1/feedback/{token['token']}"
    assert token["token"].startswith("pft_")
    expires = time.time() + 600
    assert abs(_epoch(token["expires_at"]) - expires) < 5
    browser = keyless(scores_api)
    first = browser.post(
        token["url"], json={"value": False, "comment": "wrong", "correction": "42"}
    )
    assert first.status_code == 201, first.text
    assert first.headers["access-control-allow-origin"] == "*"
    vote = first.json()["data"]
    assert (vote["source"], vote["request_id"], vote["name"]) == ("end_user", record, "thumb")
    assert (vote["value"], vote["correction"]) == (False, "42")
    second = browser.post(token["url"], json={"value": True}).json()["data"]
    assert second["id"] == vote["id"]
    stored = scores_api.get("/v1/scores", params={"request_id": record}).json()["data"]
    assert [(s["id"], s["value"]) for s in stored] == [(vote["id"], True)]


def test_the_route_answers_a_cors_preflight(scores_api: TestClient) -> None:
    token = mint(scores_api, request_id=fresh(), name="thumb")
    preflight = keyless(scores_api).options(
        token["url"],
        headers={"Origin": "https://shop.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code in (200, 204), preflight.text
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "content-type" in preflight.headers["access-control-allow-headers"].lower()


def test_a_value_outside_the_token_s_type_or_categories_is_400(scores_api: TestClient) -> None:
    browser = keyless(scores_api)
    typed = mint(scores_api, trace_id=uuid.uuid4().hex, name="thumb", data_type="boolean")
    bad = browser.post(typed["url"], json={"value": "yes"})
    assert_error(bad, 400, "VALIDATION_ERROR", "value")
    assert bad.headers["access-control-allow-origin"] == "*"
    picked = mint(scores_api, request_id=fresh(), name="mood", categories=["good", "bad"])
    assert_error(
        browser.post(picked["url"], json={"value": "meh"}), 400, "VALIDATION_ERROR", "value"
    )
    assert browser.post(picked["url"], json={"value": "bad"}).json()["data"]["data_type"] == (
        "categorical"
    )
    assert_error(browser.post(picked["url"], json={}), 400, "VALIDATION_ERROR", "value")


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _resigned(token: str, change: dict[str, Any], key: str = DEFAULT_KEY) -> str:
    """The token's payload changed and signed again with ``key``."""
    body = token[4:].split(".")[0]
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload.update(change)
    scope = TokenScope(
        key_id=payload["k"],
        request_id=payload["r"],
        trace_id=payload["t"],
        name=payload["n"],
        data_type=payload["d"],
        categories=payload["c"],
        expires=payload["e"],
        score_id=payload["i"],
    )
    return feedback_tokens.mint(scope, hash_key(key))


def _altered(token: str, change: dict[str, Any]) -> str:
    """The token's payload changed, the original MAC kept."""
    body, mac = token[4:].split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload.update(change)
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return "pft_" + base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + mac


def test_bad_altered_expired_and_foreign_tokens_are_401(scores_api: TestClient) -> None:
    record = fresh()
    good = mint(scores_api, request_id=record, name="thumb")["token"]
    browser = keyless(scores_api)
    bad = [
        "pft_nothing",
        "garbage",
        good[:-2] + ("AA" if not good.endswith("AA") else "BB"),
        _altered(good, {"r": fresh()}),  # widened onto another record
        _altered(good, {"n": "helpful"}),  # onto another name
        _altered(good, {"e": int(time.time()) + 10**6}),  # a longer life
        _resigned(good, {"e": int(time.time()) - 1}),  # genuine but expired
        _resigned(good, {"k": "key_000000000000"}),  # an unknown key id
        _resigned(good, {"r": fresh()}, key="pr-not-a-key-of-this-store"),  # a made-up key
    ]
    for token in bad:
        response = browser.post(f"/v1/feedback/{token}", json={"value": True})
        assert_error(response, 401, "INVALID_FEEDBACK_TOKEN")
        assert response.headers["access-control-allow-origin"] == "*"
    assert scores_api.get("/v1/scores", params={"request_id": record}).json()["data"] == []


@pytest.mark.cost
def test_a_flood_of_bad_tokens_costs_no_store_query(scores_api: TestClient) -> None:
    good = mint(scores_api, request_id=fresh(), name="thumb")["token"]
    browser = keyless(scores_api)
    browser.post(f"/v1/feedback/{_resigned(good, {'k': 'key_ffffffffffff'})}", json={"value": 1})
    services = scores_api.app.state.services
    queries: list[str] = []
    real = services.store.client.query

    def counting(*args: Any, **kwargs: Any) -> Any:
        queries.append(str(args[0]))
        return real(*args, **kwargs)

    services.store.client.query = counting
    try:
        for i in range(20):
            forged = _resigned(good, {"k": f"key_{i:012x}"}, key=f"pr-forger-{i}")
            assert_error(
                browser.post(f"/v1/feedback/{forged}", json={"value": True}),
                401,
                "INVALID_FEEDBACK_TOKEN",
            )
            tampered = _altered(good, {"n": f"n{i}"})
            assert_error(
                browser.post(f"/v1/feedback/{tampered}", json={"value": True}),
                401,
                "INVALID_FEEDBACK_TOKEN",
            )
    finally:
        del services.store.client.query
    # The unknown ids reload the key map at most once in the first second; nothing else.
    assert len(queries) <= 1, queries


def test_a_revoked_key_s_tokens_are_refused(scores_api: TestClient) -> None:
    services = scores_api.app.state.services
    key = services.keys.create("default")
    minter = TestClient(scores_api.app, headers={"Authorization": f"Bearer {key}"})
    token = mint(minter, request_id=fresh(), name="thumb")
    assert feedback_tokens.verify(
        token["token"], lambda k: hash_key(key) if k == key_id(hash_key(key)) else None
    )
    browser = keyless(scores_api)
    assert browser.post(token["url"], json={"value": True}).status_code == 201
    services.keys.revoke(key)
    assert_error(browser.post(token["url"], json={"value": True}), 401, "INVALID_FEEDBACK_TOKEN")


def test_an_sdk_minted_token_is_accepted(scores_api: TestClient) -> None:
    """The format of token.md, made with the raw key and no round trip, as the SDK makes it."""
    record = fresh()
    scope = TokenScope(
        key_id=key_id(hash_key(DEFAULT_KEY)),
        request_id=record,
        trace_id=None,
        name="helpful",
        data_type="numeric",
        categories=None,
        expires=int(time.time()) + 60,
        score_id="score_" + "ab" * 16,
    )
    token = feedback_tokens.mint(scope, hash_key(DEFAULT_KEY))
    posted = keyless(scores_api).post(f"/v1/feedback/{token}", json={"value": 0.25})
    assert posted.status_code == 201, posted.text
    assert posted.json()["data"]["id"] == "score_" + "ab" * 16


def test_another_project_s_key_cannot_mint_onto_or_read_this_project(
    scores_api: TestClient, other_api: TestClient
) -> None:
    record = fresh()
    theirs = mint(other_api, request_id=record, name="thumb")
    assert keyless(other_api).post(theirs["url"], json={"value": True}).status_code == 201
    # Their vote lives in their project; this project's record shows none of it.
    assert scores_api.get("/v1/scores", params={"request_id": record}).json()["data"] == []
    assert len(other_api.get("/v1/scores", params={"request_id": record}).json()["data"]) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"request_id": "r", "trace_id": "a" * 32, "name": "x"},
        {"name": "x"},
        {"request_id": "r", "name": "x", "ttl_seconds": 0},
        {"request_id": "r", "name": "x", "ttl_seconds": 2_592_001},
        {"request_id": "r", "name": ""},
        {"request_id": "r", "name": "x", "data_type": "boolean", "categories": ["a"]},
    ],
)
def test_bad_token_requests_are_400(scores_api: TestClient, body: dict[str, Any]) -> None:
    assert_error(scores_api.post("/v1/scores/tokens", json=body), 400, "VALIDATION_ERROR")


def test_the_access_log_never_holds_a_token() -> None:
    import logging

    from promptrail.collector.access_log import DropQueryStrings

    token = "pft_eyJ2IjoxfQ.c2ln"
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        "%s %s %s %s %s",
        ("1.2.3.4", "POST", f"/v1/feedback/{token}", "1.1", 201),
        None,
    )
    DropQueryStrings().filter(record)
    assert token not in record.getMessage()
    assert "/v1/feedback/" in record.getMessage()
