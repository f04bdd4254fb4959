"""Errors a newcomer meets first say what to change, and list items tell calls apart."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.keys import DEFAULT_KEY

PROMPT = b'{"name": "a", "template": "t", "model": "gpt-4o"}'


def error_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["field"] == "body"
    return error


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
@pytest.mark.parametrize("path", ["/v1/prompts", "/v1/requests"])
def test_a_json_body_without_the_json_content_type_says_which_header_to_send(
    api: TestClient, path: str, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}

    error = error_of(api.post(path, content=PROMPT, headers=headers))

    assert "Content-Type: application/json" in error["message"]
    assert (content_type or "no Content-Type") in error["message"]
    assert api.get("/v1/prompts").json()["data"] == []


def test_malformed_json_names_the_line_and_column(api: TestClient) -> None:
    raw = b'{\n  "name": "a",\n  "template": "t",\n  "model": \n}'

    error = error_of(
        api.post("/v1/prompts", content=raw, headers={"Content-Type": "application/json"})
    )

    assert "line 5, column 1" in error["message"], error["message"]
    assert (error["details"]["line"], error["details"]["column"]) == (5, 1)
    assert [e["field"] for e in error["details"]["errors"]] == ["body"]


def test_a_one_line_body_counts_columns_from_one(api: TestClient) -> None:
    raw = b'{"name": "a", "template": "t", "model": }'

    error = error_of(
        api.post("/v1/prompts", content=raw, headers={"Content-Type": "application/json"})
    )

    assert (error["details"]["line"], error["details"]["column"]) == (1, raw.index(b"}") + 1)
    assert "Expecting value" in error["message"]


def test_list_items_carry_the_model_whichever_way_the_list_is_read(api: TestClient) -> None:
    for number, model in enumerate(["gpt-4o-mini", "claude-3-5-haiku-latest", "gpt-4o-mini"]):
        created = api.post(
            "/v1/requests",
            json={"model": model, "output": {"n": number}, "metadata": {"user_id": "u1"}},
        )
        assert created.status_code == 201, created.text
    expected = ["gpt-4o-mini", "claude-3-5-haiku-latest", "gpt-4o-mini"][::-1]

    # The plain list and the metadata index are read differently: both show the model.
    for params in ({}, {"metadata.user_id": "u1"}, {"status": "success"}):
        listed = api.get("/v1/requests", params=params).json()["data"]
        assert [item["model"] for item in listed] == expected, params


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        ("/v1/prompts", "GET", None),
        ("/v1/requests", "POST", {"output": "x"}),
        # The key is checked before the body is parsed, on a body the API would refuse too.
        ("/v1/prompts", "POST", {"name": 3}),
    ],
)
def test_a_key_sent_without_bearer_is_told_to_add_bearer(
    api: TestClient, path: str, method: str, body: Any
) -> None:
    anon = TestClient(api.app)

    response = anon.request(method, path, json=body, headers={"Authorization": DEFAULT_KEY})

    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("INVALID_API_KEY", "authentication_error")
    assert "Bearer " in error["message"] and "Missing" not in error["message"]
    # With no header at all the key is missing, and the message says so.
    missing = anon.request(method, path, json=body).json()["error"]["message"]
    assert missing.startswith("Missing API key")


def test_validation_messages_carry_no_pydantic_prefix(api: TestClient) -> None:
    too_many = {f"k{i}": "v" for i in range(101)}

    one = api.post("/v1/requests", json={"metadata": too_many}).json()["error"]
    batch = api.post(
        "/v1/requests/batch", json={"records": [{"output": "ok"}, {"metadata": too_many}]}
    ).json()["data"]["rejected"][0]["error"]

    for error in (one, batch):
        assert error["message"] == "metadata: metadata holds at most 100 keys", error
        assert all("Value error" not in e["message"] for e in error["details"]["errors"])
