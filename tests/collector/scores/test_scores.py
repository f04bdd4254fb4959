"""Scores and score configs (docs/api-notes.md, "Scores and feedback", issue 31 point 1) through
HTTP against the real store.

One collector serves the module (each test uses its own record ids and names), so the file
costs one store start-up, not one per test.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.scores.steps import assert_error, created, fresh


def test_a_score_is_stored_with_its_type_inferred_and_read_back(scores_api: TestClient) -> None:
    record = fresh()
    numeric = created(scores_api, request_id=record, name="helpful", value=0.8, comment="ok")
    boolean = created(scores_api, request_id=record, name="thumb", value=True)
    text = created(scores_api, request_id=record, name="tone", value="rude", correction="Be polite")
    integer = created(scores_api, request_id=record, name="stars", value=4)
    assert numeric["id"].startswith("score_") and len(numeric["id"]) == 6 + 32
    assert (numeric["data_type"], numeric["value"], numeric["comment"]) == ("numeric", 0.8, "ok")
    assert (boolean["data_type"], boolean["value"]) == ("boolean", True)
    assert (text["data_type"], text["correction"]) == ("categorical", "Be polite")
    assert (integer["data_type"], integer["value"]) == ("numeric", 4)
    assert numeric["source"] == "api" and numeric["trace_id"] is None
    for score in (numeric, boolean, text, integer):
        got = scores_api.get(f"/v1/scores/{score['id']}")
        assert got.status_code == 200, got.text
        assert got.json()["data"] == score
    listed = scores_api.get("/v1/scores", params={"request_id": record}).json()["data"]
    assert [s["id"] for s in listed] == [integer["id"], text["id"], boolean["id"], numeric["id"]]


def test_a_score_on_a_trace_and_the_one_target_rule(scores_api: TestClient) -> None:
    trace = uuid.uuid4().hex
    score = created(scores_api, trace_id=trace, name="resolved", value=False, source="eval")
    assert (score["trace_id"], score["request_id"], score["source"]) == (trace, None, "eval")
    both = scores_api.post(
        "/v1/scores", json={"request_id": "r", "trace_id": trace, "name": "x", "value": 1}
    )
    assert_error(both, 400, "VALIDATION_ERROR")
    neither = scores_api.post("/v1/scores", json={"name": "x", "value": 1})
    assert_error(neither, 400, "VALIDATION_ERROR")
    bad_trace = scores_api.post("/v1/scores", json={"trace_id": "xyz", "name": "x", "value": 1})
    assert_error(bad_trace, 400, "VALIDATION_ERROR", "trace_id")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "value": "yes", "data_type": "numeric"}, "value"),
        ({"name": "x", "value": 1, "data_type": "boolean"}, "value"),
        ({"name": "x", "value": True, "data_type": "categorical"}, "value"),
        ({"name": "", "value": 1}, "name"),
        ({"name": "x" * 101, "value": 1}, "name"),
        ({"name": "x", "value": None}, "value"),
        ({"name": "x", "value": [1]}, "value"),
        ({"name": "x", "value": 1, "id": "has space"}, "id"),
        ({"name": "x", "value": 1, "id": "x" * 129}, "id"),
        ({"name": "x", "value": 1, "source": "end_user"}, "source"),
        ({"name": "x", "value": 1, "metadata": []}, "metadata"),
    ],
)
def test_bad_scores_are_400_naming_the_field(
    scores_api: TestClient, body: dict[str, Any], field: str
) -> None:
    response = scores_api.post("/v1/scores", json={"request_id": fresh(), **body})
    assert_error(response, 400, "VALIDATION_ERROR")
    assert response.json()["error"]["details"]["field"].startswith(field), response.text


def test_a_repeated_id_replaces_and_a_moved_score_leaves_its_old_record(
    scores_api: TestClient,
) -> None:
    first, second = fresh(), fresh()
    score_id = f"client:{uuid.uuid4().hex}"
    created(scores_api, id=score_id, request_id=first, name="thumb", value=True)
    again = created(scores_api, id=score_id, request_id=first, name="thumb", value=True)
    assert again["id"] == score_id
    assert len(scores_api.get("/v1/scores", params={"request_id": first}).json()["data"]) == 1
    moved = created(scores_api, id=score_id, request_id=second, name="thumb", value=False)
    assert scores_api.get("/v1/scores", params={"request_id": first}).json()["data"] == []
    assert scores_api.get("/v1/scores", params={"request_id": second}).json()["data"] == [moved]
    assert scores_api.get(f"/v1/scores/{score_id}").json()["data"] == moved
    # A merge changes nothing a read shows.
    services = scores_api.app.state.services
    services.store.client.command(f"OPTIMIZE TABLE {services.store.scores.table} FINAL")
    assert scores_api.get("/v1/scores", params={"request_id": first}).json()["data"] == []
    assert scores_api.get(f"/v1/scores/{score_id}").json()["data"] == moved


def test_delete_and_unknown_ids_are_score_not_found(scores_api: TestClient) -> None:
    score = created(scores_api, request_id=fresh(), name="thumb", value=True)
    deleted = scores_api.delete(f"/v1/scores/{score['id']}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["data"] == score
    for response in (
        scores_api.get(f"/v1/scores/{score['id']}"),
        scores_api.delete(f"/v1/scores/{score['id']}"),
        scores_api.get("/v1/scores/score_nope"),
    ):
        assert_error(response, 404, "SCORE_NOT_FOUND")
    assert scores_api.get("/v1/scores", params={"request_id": score["request_id"]}).json() == {
        "data": [],
        "pagination": {"has_more": False},
    }
    # Posting the id again brings it back (a vote changed after a delete).
    assert created(scores_api, id=score["id"], request_id=fresh(), name="t", value=1)


def test_the_list_filters_pages_newest_first_and_refuses_a_forged_cursor(
    scores_api: TestClient,
) -> None:
    record = fresh()
    made = [
        created(
            scores_api,
            request_id=record,
            name="page" if i % 2 else "other",
            value=i,
            source="eval" if i % 3 == 0 else "api",
            created_at=f"2026-01-01T00:00:0{i}Z",
        )
        for i in range(7)
    ]
    newest_first = [s["id"] for s in reversed(made)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"request_id": record, "limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = scores_api.get("/v1/scores", params=params).json()
        seen += [s["id"] for s in page["data"]]
        if not page["pagination"]["has_more"]:
            break
        cursor = page["pagination"]["next_cursor"]
    assert seen == newest_first
    named = scores_api.get("/v1/scores", params={"request_id": record, "name": "page"}).json()
    assert [s["value"] for s in named["data"]] == [5, 3, 1]
    evals = scores_api.get("/v1/scores", params={"request_id": record, "source": "eval"}).json()
    assert [s["value"] for s in evals["data"]] == [6, 3, 0]
    forged = scores_api.get("/v1/scores", params={"cursor": "abc"})
    assert_error(forged, 400, "VALIDATION_ERROR", "cursor")
    assert_error(scores_api.get("/v1/scores", params={"limit": 0}), 400, "VALIDATION_ERROR")


def test_a_batch_stores_the_good_and_reports_the_bad_by_index(scores_api: TestClient) -> None:
    record = fresh()
    response = scores_api.post(
        "/v1/scores/batch",
        json={
            "scores": [
                {"request_id": record, "name": "a", "value": 1},
                "not a score",
                {"request_id": record, "name": "b", "value": True, "data_type": "numeric"},
                {"request_id": record, "name": "c", "value": "fine", "id": "batch-1"},
                {"request_id": record, "name": "c", "value": "fine", "id": "batch-1"},
            ]
        },
    )
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["accepted"] == 3
    assert [r["index"] for r in data["rejected"]] == [1, 2]
    assert data["rejected"][1]["error"]["details"]["field"] == "value"
    stored = scores_api.get("/v1/scores", params={"request_id": record}).json()["data"]
    assert sorted(s["name"] for s in stored) == ["a", "c"]  # the repeated id is one score
    assert_error(scores_api.post("/v1/scores/batch", json={}), 400, "VALIDATION_ERROR")


def test_score_configs_validate_values_naming_value(scores_api: TestClient) -> None:
    name = fresh("stars")
    put = scores_api.put(
        f"/v1/score-configs/{name}",
        json={"data_type": "numeric", "min": 1, "max": 5, "description": "1-5 stars"},
    )
    assert put.status_code == 200, put.text
    assert put.json()["data"]["min"] == 1 and put.json()["data"]["name"] == name
    record = fresh()
    assert created(scores_api, request_id=record, name=name, value=5)["value"] == 5
    for value in (0, 5.5, "five", True):
        response = scores_api.post(
            "/v1/scores", json={"request_id": record, "name": name, "value": value}
        )
        assert_error(response, 400, "VALIDATION_ERROR", "value")
    mood = fresh("mood")
    scores_api.put(
        f"/v1/score-configs/{mood}", json={"data_type": "categorical", "categories": ["good"]}
    )
    assert created(scores_api, request_id=record, name=mood, value="good")
    bad = scores_api.post("/v1/scores", json={"request_id": record, "name": mood, "value": "meh"})
    assert_error(bad, 400, "VALIDATION_ERROR", "value")
    batch = scores_api.post(
        "/v1/scores/batch",
        json={"scores": [{"request_id": record, "name": name, "value": 9}]},
    ).json()["data"]
    assert batch["accepted"] == 0
    assert batch["rejected"][0]["error"]["details"]["field"] == "value"
    listed = {c["name"]: c for c in scores_api.get("/v1/score-configs").json()["data"]}
    assert listed[mood]["categories"] == ["good"] and listed[name]["max"] == 5
    # A config replaced: the newest wins.
    scores_api.put(f"/v1/score-configs/{name}", json={"data_type": "numeric", "max": 10})
    assert created(scores_api, request_id=record, name=name, value=9)["value"] == 9


@pytest.mark.parametrize(
    "body",
    [
        {"data_type": "numeric", "min": 5, "max": 1},
        {"data_type": "boolean", "min": 0},
        {"data_type": "numeric", "categories": ["a"]},
        {"data_type": "categorical", "categories": []},
        {"data_type": "stars"},
        {},
    ],
)
def test_bad_score_configs_are_400(scores_api: TestClient, body: dict[str, Any]) -> None:
    assert_error(scores_api.put("/v1/score-configs/x", json=body), 400, "VALIDATION_ERROR")


def test_another_project_sees_and_changes_none_of_the_scores_or_configs(
    scores_api: TestClient, other_api: TestClient
) -> None:
    record = fresh()
    score = created(scores_api, request_id=record, name="private", value=1)
    name = fresh("cfg")
    scores_api.put(f"/v1/score-configs/{name}", json={"data_type": "numeric", "max": 1})
    assert_error(other_api.get(f"/v1/scores/{score['id']}"), 404, "SCORE_NOT_FOUND")
    assert_error(other_api.delete(f"/v1/scores/{score['id']}"), 404, "SCORE_NOT_FOUND")
    assert other_api.get("/v1/scores", params={"request_id": record}).json()["data"] == []
    assert name not in {c["name"] for c in other_api.get("/v1/score-configs").json()["data"]}
    # The same id written by another project is its own score: the first stays as it was.
    theirs = other_api.post(
        "/v1/scores", json={"id": score["id"], "request_id": record, "name": name, "value": 7}
    )
    assert theirs.status_code == 201, theirs.text  # their project has no config of that name
    assert scores_api.get(f"/v1/scores/{score['id']}").json()["data"] == score
    assert scores_api.get("/v1/scores", params={"request_id": record}).json()["data"] == [score]
    unknown = scores_api.get("/v1/scores", headers={"Authorization": "Bearer pr-nope"})
    assert_error(unknown, 401, "INVALID_API_KEY")
