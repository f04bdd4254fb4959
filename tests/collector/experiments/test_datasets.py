"""Datasets and items (docs/api-notes.md, "Datasets and experiments", issue 33 point 1): CRUD,
upsert in place, from the log.

A real collector on the real embedded store, over ASGI.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.contract import assert_error
from tests.collector.experiments.steps import every_page


def make(api: TestClient, name: str = "support", **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/datasets", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def add(api: TestClient, name: str, items: list[Any]) -> dict[str, Any]:
    # As JSON text with escapes, so that a lone surrogate reaches the collector as sent.
    response = api.post(
        f"/v1/datasets/{name}/items",
        content=json.dumps({"items": items}),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def items_of(api: TestClient, name: str, **params: Any) -> list[dict[str, Any]]:
    return every_page(api, f"/v1/datasets/{name}/items", **params)


def log(api: TestClient, n: int, **extra: Any) -> str:
    record_id = f"req_ds_{n}"
    body = {
        "id": record_id,
        "created_at": f"2026-03-01T10:00:{n:02d}Z",
        "prompt_name": "support-reply",
        "model": "gpt-4o-mini",
        "input_variables": {"question": f"q{n}"},
        "output": {"content": f"answer {n}"},
        **extra,
    }
    response = api.post("/v1/requests", json=body)
    assert response.status_code == 201, response.text
    return record_id


def test_a_dataset_is_created_read_by_name_or_id_listed_and_deleted(api: TestClient) -> None:
    made = make(api, "support", description="hard cases", metadata={"team": "cx"})
    assert made["id"].startswith("dataset_") and len(made["id"]) == len("dataset_") + 32
    assert (made["name"], made["description"], made["metadata"], made["item_count"]) == (
        "support",
        "hard cases",
        {"team": "cx"},
        0,
    )
    assert api.get("/v1/datasets/support").json()["data"] == made
    assert api.get(f"/v1/datasets/{made['id']}").json()["data"] == made
    other = make(api, "billing")
    listed = api.get("/v1/datasets", params={"limit": 1})
    assert [d["name"] for d in listed.json()["data"]] == ["billing"]
    second = api.get("/v1/datasets", params={"cursor": listed.json()["pagination"]["next_cursor"]})
    assert [d["name"] for d in second.json()["data"]] == ["support"]
    assert_error(api.post("/v1/datasets", json={"name": "support"}), 409, "DATASET_ALREADY_EXISTS")
    assert api.delete(f"/v1/datasets/{other['id']}").json()["data"]["name"] == "billing"
    assert_error(api.get("/v1/datasets/billing"), 404, "DATASET_NOT_FOUND")
    assert_error(api.delete("/v1/datasets/billing"), 404, "DATASET_NOT_FOUND")
    # The name is free again once its dataset is deleted.
    assert make(api, "billing")["id"] != other["id"]


def test_items_keep_their_order_and_an_id_posted_again_replaces_its_item_in_place(
    api: TestClient,
) -> None:
    make(api)
    result = add(
        api,
        "support",
        [
            {"id": f"i{n}", "input_variables": {"q": n}, "expected_output": f"a{n}"}
            for n in range(5)
        ],
    )
    assert result == {"accepted": 5, "rejected": []}
    add(api, "support", [{"id": "i1", "input_variables": {"q": 99}, "expected_output": {"k": 1}}])
    add(api, "support", [{"input_variables": {"q": 5}}])
    items = items_of(api, "support", limit=2)
    assert [i["id"] for i in items[:5]] == ["i0", "i1", "i2", "i3", "i4"]
    assert items[1]["input_variables"] == {"q": 99}
    assert items[1]["expected_output"] == {"k": 1}
    assert items[5]["id"].startswith("item_") and items[5]["expected_output"] is None
    assert api.get("/v1/datasets/support").json()["data"]["item_count"] == 6
    deleted = api.delete("/v1/datasets/support/items/i2")
    assert deleted.json()["data"]["id"] == "i2"
    assert [i["id"] for i in items_of(api, "support")][:4] == ["i0", "i1", "i3", "i4"]
    assert_error(api.delete("/v1/datasets/support/items/i2"), 404, "DATASET_NOT_FOUND")


def test_bad_items_are_rejected_by_index_and_the_others_stored(api: TestClient) -> None:
    make(api)
    result = add(
        api,
        "support",
        [
            {"id": "ok", "input_variables": {"q": 1}},
            {"id": "no vars"},
            {"id": "bad id!", "input_variables": {}},
            "not an object",
            {"input_variables": {"q": "\ud800"}},
        ],
    )
    assert result["accepted"] == 1
    assert [r["index"] for r in result["rejected"]] == [1, 2, 3, 4]
    assert all(r["error"]["code"] == "VALIDATION_ERROR" for r in result["rejected"])
    assert [i["id"] for i in items_of(api, "support")] == ["ok"]


def test_bad_input_gets_the_contract_s_errors(api: TestClient) -> None:
    assert_error(api.post("/v1/datasets", json={"name": ""}), 400, "VALIDATION_ERROR", "name")
    assert_error(api.post("/v1/datasets", json={"name": "a b"}), 400, "VALIDATION_ERROR", "name")
    assert_error(api.post("/v1/datasets", json={"nom": "x"}), 400, "VALIDATION_ERROR")
    assert_error(api.post("/v1/datasets/none/items", json={"items": []}), 404, "DATASET_NOT_FOUND")
    assert_error(api.get("/v1/datasets/none/items"), 404, "DATASET_NOT_FOUND")
    make(api)
    too_many = {"items": [{"input_variables": {}}] * 1001}
    assert_error(api.post("/v1/datasets/support/items", json=too_many), 400, "VALIDATION_ERROR")
    assert_error(
        api.get("/v1/datasets/support/items", params={"cursor": "nonsense"}),
        400,
        "VALIDATION_ERROR",
        "cursor",
    )
    from_log = "/v1/datasets/support/items/from-requests"
    assert_error(api.post(from_log, json={"limit": 10001}), 400, "VALIDATION_ERROR", "limit")
    assert_error(
        api.post(from_log, json={"filters": {"colour": "red"}}),
        400,
        "VALIDATION_ERROR",
        "filters.colour",
    )
    assert_error(
        api.post(from_log, json={"filters": {"score.helpful.min": "lots"}}),
        400,
        "VALIDATION_ERROR",
        "filters.score.helpful.min",
    )
    assert_error(
        api.post(from_log, json={"filters": {"start_date": "yesterday"}}),
        400,
        "VALIDATION_ERROR",
        "filters.start_date",
    )


def test_items_from_the_log_take_the_filters_scores_included_and_are_made_once(
    api: TestClient,
) -> None:
    make(api)
    down = [log(api, n) for n in range(3)]
    up = log(api, 3)
    log(api, 4, prompt_name="other")
    log(api, 5, status="error", error="boom")
    for record in down:
        response = api.post(
            "/v1/scores", json={"request_id": record, "name": "thumbs", "value": "down"}
        )
        assert response.status_code == 201, response.text
    api.post("/v1/scores", json={"request_id": up, "name": "thumbs", "value": "up"})
    body = {
        "filters": {"prompt_name": "support-reply", "status": "success", "score.thumbs": "down"},
        "output_as_expected": True,
    }
    path = "/v1/datasets/support/items/from-requests"
    response = api.post(path, json=body)
    assert response.status_code == 201, response.text
    assert response.json()["data"] == {"accepted": 3}
    # The same records again make no new items.
    assert api.post(path, json=body).json()["data"] == {"accepted": 3}
    items = items_of(api, "support")
    assert sorted(i["id"] for i in items) == sorted(down)
    by_id = {i["id"]: i for i in items}
    assert by_id["req_ds_1"]["input_variables"] == {"question": "q1"}
    assert by_id["req_ds_1"]["expected_output"] == "answer 1"
    assert by_id["req_ds_1"]["source_request_id"] == "req_ds_1"
    # Without output_as_expected, and a limit: the newest records first.
    make(api, "plain")
    response = api.post(
        "/v1/datasets/plain/items/from-requests",
        json={"filters": {"prompt_name": "support-reply"}, "limit": 2},
    )
    assert response.json()["data"] == {"accepted": 2}
    plain = items_of(api, "plain")
    assert sorted(i["id"] for i in plain) == ["req_ds_3", "req_ds_5"]
    assert all(i["expected_output"] is None for i in plain)
