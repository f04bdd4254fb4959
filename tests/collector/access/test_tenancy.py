"""A key sees and changes only its own project's data; keys are stored hashed (docs/security.md,
"Tenants")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from tests.keys import DEFAULT_KEY


def assert_not_found(response: Any, ref: str) -> None:
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "PROMPT_NOT_FOUND", error
    assert error["type"] == "not_found_error", error
    assert error["details"]["prompt_name"] == ref


@pytest.fixture
def other_key(api: TestClient) -> str:
    """A key of project ``other``."""
    key: str = api.app.state.services.keys.create("other")
    return key


@pytest.fixture
def other(api: TestClient, other_key: str) -> TestClient:
    """A client on the same app authenticated as project ``other``."""
    return TestClient(api.app, headers={"X-API-Key": other_key})


@pytest.fixture
def owned(api: TestClient) -> Any:
    """A prompt of project default with two versions and two labels."""
    created = api.post(
        "/v1/prompts",
        json={
            "name": "secret-prompt",
            "template": "Default secret {x}",
            "model": "gpt-4o",
            "description": "belongs to default",
            "parameters": {"temperature": 0.3},
            "tags": ["private"],
            "folder": "/team",
            "labels": ["production"],
        },
    )
    assert created.status_code == 201, created.text
    patched = api.patch(
        "/v1/prompts/secret-prompt", json={"template": "Default v2 {x}", "labels": ["staging"]}
    )
    assert patched.status_code == 200, patched.text
    return created.json()["data"]


def snapshot(api: TestClient, name: str = "secret-prompt") -> dict[str, Any]:
    """Everything a user of project default can read about one prompt."""
    paths = {
        "prompt": f"/v1/prompts/{name}",
        "versions": f"/v1/prompts/{name}/versions",
        "v1": f"/v1/prompts/{name}/versions/1",
        "v2": f"/v1/prompts/{name}/versions/2",
        "labels": f"/v1/prompts/{name}/labels",
        "template": f"/v1/prompts/{name}/template",
        "production": f"/v1/prompts/{name}/versions/by-label/production/template",
        "list": "/v1/prompts",
    }
    result = {}
    for key, path in paths.items():
        response = api.get(path)
        assert response.status_code == 200, (path, response.text)
        result[key] = response.json()
    return result


READS = [
    "/v1/prompts/{ref}",
    "/v1/prompts/{ref}/versions",
    "/v1/prompts/{ref}/versions/1",
    "/v1/prompts/{ref}/labels",
    "/v1/prompts/{ref}/template",
    "/v1/prompts/{ref}/versions/2/template",
    "/v1/prompts/{ref}/versions/by-label/production/template",
    "/v1/prompts/{ref}/versions/by-label/latest/template",
    "/api/v1/prompts/{ref}",
    "/api/v1/prompts/{ref}/template",
]


@pytest.mark.parametrize("by", ["name", "id"])
def test_another_project_cannot_read_a_prompt(
    api: TestClient, other: TestClient, owned: Any, by: str
) -> None:
    ref = owned["name"] if by == "name" else owned["id"]
    for path in READS:
        response = other.get(path.format(ref=ref))

        assert_not_found(response, ref)


def test_another_project_does_not_list_a_prompt(
    api: TestClient, other: TestClient, owned: Any
) -> None:
    for params in (
        {},
        {"search": "secret"},
        {"folder": "/team"},
        {"tags": "private"},
        {"limit": 100},
    ):
        response = other.get("/v1/prompts", params=params)

        assert response.status_code == 200, response.text
        assert response.json()["data"] == []
        assert response.json()["pagination"]["total"] == 0
        assert response.json()["pagination"]["has_more"] is False

    mine = api.get("/v1/prompts").json()
    assert [p["name"] for p in mine["data"]] == ["secret-prompt"]
    assert mine["pagination"]["total"] == 1


WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("PATCH", "/v1/prompts/{ref}", {"template": "Stolen {x}"}),
    ("PATCH", "/v1/prompts/{ref}", {"description": "defaced", "labels": ["production"]}),
    ("POST", "/v1/prompts/{ref}/rollback", {"version": 1}),
    ("POST", "/v1/prompts/{ref}/rollback", {"version": 1, "labels": ["hijacked"]}),
    ("PUT", "/v1/prompts/{ref}/labels/production", {"version": 1}),
    ("PUT", "/v1/prompts/{ref}/labels/hijacked", {"version": 2}),
    ("DELETE", "/v1/prompts/{ref}/labels/production", None),
    ("DELETE", "/v1/prompts/{ref}/labels/staging", None),
    ("DELETE", "/v1/prompts/{ref}", None),
    ("DELETE", "/api/v1/prompts/{ref}", None),
]


@pytest.mark.parametrize("by", ["name", "id"])
def test_another_project_cannot_change_or_delete_a_prompt(
    api: TestClient, other: TestClient, owned: Any, by: str
) -> None:
    before = snapshot(api)
    ref = owned["name"] if by == "name" else owned["id"]

    for method, path, body in WRITES:
        response = other.request(method, path.format(ref=ref), json=body)

        assert_not_found(response, ref)

    assert snapshot(api) == before
    assert [v["version"] for v in before["versions"]["data"]] == [2, 1]
    assert {label["label"]: label["version"] for label in before["labels"]["data"]} == {
        "production": 1,
        "staging": 2,
    }


def test_another_project_cannot_run_a_prompt(
    api: TestClient, other: TestClient, owned: Any
) -> None:
    before = snapshot(api)
    for ref in (owned["name"], owned["id"]):
        for path in (
            "/v1/prompts/{ref}/run",
            "/v1/prompts/{ref}/versions/1/run",
            "/v1/prompts/{ref}/versions/by-label/production/run",
        ):
            response = other.post(path.format(ref=ref), json={"variables": {"x": "y"}})

            assert_not_found(response, ref)
    assert snapshot(api) == before


def test_two_projects_own_the_same_name_independently(
    api: TestClient, other: TestClient, owned: Any
) -> None:
    before = snapshot(api)

    created = other.post(
        "/v1/prompts",
        json={"name": "secret-prompt", "template": "Other's own {y}", "model": "claude-3-5"},
    )

    assert created.status_code == 201, created.text
    theirs = created.json()["data"]
    assert theirs["id"] != owned["id"]
    assert theirs["version"] == 1
    assert other.get("/v1/prompts/secret-prompt").json()["data"]["template"] == "Other's own {y}"
    assert api.get("/v1/prompts/secret-prompt").json()["data"]["template"] == "Default v2 {x}"
    # Each id stays private to its project, even though the names are equal.
    assert_not_found(other.get(f"/v1/prompts/{owned['id']}"), owned["id"])
    assert_not_found(api.get(f"/v1/prompts/{theirs['id']}"), theirs["id"])

    # Changes in "other" stay in "other".
    assert other.patch("/v1/prompts/secret-prompt", json={"template": "Other v2"}).status_code == (
        200
    )
    moved = other.put("/v1/prompts/secret-prompt/labels/production", json={"version": 2})
    assert moved.status_code == 200, moved.text
    assert other.post("/v1/prompts/secret-prompt/rollback", json={"version": 1}).status_code == (
        200
    )
    payload = other.get("/v1/prompts/secret-prompt/versions/by-label/production/template").json()
    assert payload["content"] == "Other v2"
    assert payload["prompt_id"] != api.get("/v1/prompts/secret-prompt/template").json()["prompt_id"]
    assert [
        v["version"] for v in other.get("/v1/prompts/secret-prompt/versions").json()["data"]
    ] == [
        3,
        2,
        1,
    ]
    assert snapshot(api) == before

    # A second create in the same project is still a conflict, in either project.
    for client in (api, other):
        again = client.post(
            "/v1/prompts", json={"name": "secret-prompt", "template": "t", "model": "gpt-4o"}
        )
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "PROMPT_ALREADY_EXISTS"

    # Deleting in "other" leaves default's prompt alive, and the reverse.
    assert other.delete("/v1/prompts/secret-prompt").status_code == 200
    assert_not_found(other.get("/v1/prompts/secret-prompt"), "secret-prompt")
    assert snapshot(api) == before
    recreated = other.post(
        "/v1/prompts", json={"name": "secret-prompt", "template": "Third", "model": "gpt-4o"}
    )
    assert recreated.status_code == 201, recreated.text
    assert api.delete("/v1/prompts/secret-prompt").status_code == 200
    assert other.get("/v1/prompts/secret-prompt").json()["data"]["template"] == "Third"
    assert other.get("/v1/prompts").json()["pagination"]["total"] == 1
    assert api.get("/v1/prompts").json()["pagination"]["total"] == 0


def test_a_project_sees_only_its_own_prompts_in_lists(
    api: TestClient, other: TestClient, owned: Any
) -> None:
    for index in range(3):
        response = other.post(
            "/v1/prompts",
            json={
                "name": f"other-{index}",
                "template": "secret of other",
                "model": "gpt-4o",
                "description": "secret",
                "tags": ["private"],
                "folder": "/team",
            },
        )
        assert response.status_code == 201, response.text

    for params in ({}, {"search": "secret"}, {"tags": "private"}, {"folder": "/team"}):
        mine = api.get("/v1/prompts", params=params).json()
        theirs = other.get("/v1/prompts", params=params).json()
        assert [p["name"] for p in mine["data"]] == ["secret-prompt"], params
        assert mine["pagination"]["total"] == 1
        assert sorted(p["name"] for p in theirs["data"]) == ["other-0", "other-1", "other-2"]
        assert theirs["pagination"]["total"] == 3

    # Paging through "other" never crosses into default's prompts.
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 1}
        if cursor:
            params["cursor"] = cursor
        page = other.get("/v1/prompts", params=params).json()
        seen += [p["name"] for p in page["data"]]
        cursor = page["pagination"].get("next_cursor")
        if not cursor:
            break
    assert sorted(seen) == ["other-0", "other-1", "other-2"]


def test_each_key_authenticates_as_its_own_project_in_either_header(
    api: TestClient, other_key: str, owned: Any
) -> None:
    client = TestClient(api.app)
    for headers in ({"Authorization": f"Bearer {other_key}"}, {"X-API-Key": other_key}):
        response = client.get("/v1/prompts", headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["pagination"]["total"] == 0
    for headers in ({"Authorization": f"Bearer {DEFAULT_KEY}"}, {"X-API-Key": DEFAULT_KEY}):
        response = client.get("/v1/prompts", headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["pagination"]["total"] == 1


def _cells(api: TestClient, database: str, table: str) -> list[str]:
    client = api.app.state.services.store.client
    rows = client.query(f"SELECT * FROM `{database}`.`{table}`").result_rows
    return [str(cell) for row in rows for cell in row]


def test_keys_are_stored_only_as_hashes(
    api: TestClient, other_key: str, settings: Settings, store_url: str, owned: Any
) -> None:
    # Use both keys so that every code path that might record a key has run.
    assert api.get("/v1/prompts").status_code == 200
    assert TestClient(api.app).get("/v1/prompts", headers={"X-API-Key": other_key}).status_code == (
        200
    )
    raw_keys = [DEFAULT_KEY, other_key]

    key_cells = _cells(api, settings.database, "api_keys")
    assert "default" in key_cells
    assert "other" in key_cells
    for raw in raw_keys:
        assert not any(raw in cell for cell in key_cells)

    # Nor anywhere else in the project's database.
    client = api.app.state.services.store.client
    tables = client.query(
        "SELECT name FROM system.tables WHERE database = {db:String} "
        "AND engine NOT IN ('MaterializedView', 'View')",
        parameters={"db": settings.database},
    ).result_rows
    assert len(tables) >= 2
    for (table,) in tables:
        cells = _cells(api, settings.database, table)
        for raw in raw_keys:
            assert not any(raw in cell for cell in cells), table

    # Nor in the store's files on disk.
    root = Path(store_url.removeprefix("chdb://"))
    needle = other_key.encode()
    for path in root.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path


def test_every_new_key_is_distinct_and_works(api: TestClient) -> None:
    keys = api.app.state.services.keys
    first = keys.create("other")
    second = keys.create("other")

    assert first != second
    assert len(first) >= 32
    client = TestClient(api.app)
    for key in (first, second):
        assert client.get("/v1/prompts", headers={"X-API-Key": key}).status_code == 200
    assert client.get("/v1/prompts", headers={"X-API-Key": first[:-1]}).status_code == 401


def test_another_project_sees_none_of_a_projects_records(
    api: TestClient, other: TestClient
) -> None:
    trace_id = "ab" * 16
    logged = api.post(
        "/v1/requests",
        json={
            "model": "gpt-4o-mini",
            "prompt_name": "secret-prompt",
            "output": "a private reply about quokkas",
            "metadata": {"user_id": "u-1"},
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            "trace_id": trace_id,
            "span_id": "cd" * 8,
        },
    )
    assert logged.status_code == 201, logged.text
    record_id = logged.json()["data"]["id"]
    reads = {
        "list": "/v1/requests",
        "by metadata": "/v1/requests?metadata.user_id=u-1",
        "by trace": f"/v1/requests?trace_id={trace_id}",
        "search": "/v1/requests/search?query=quokkas",
    }
    # The owner sees its record everywhere...
    for name, path in reads.items():
        assert [r["id"] for r in api.get(path).json()["data"]] == [record_id], name
    # ...the other project nowhere: not listed, not found, not searched, not summed.
    for name, path in reads.items():
        answer = other.get(path)
        assert answer.status_code == 200 and answer.json()["data"] == [], name
    missing = other.get(f"/v1/requests/{record_id}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "REQUEST_NOT_FOUND"
    usage = other.get("/v1/requests/analytics", params={"metric": "usage"}).json()["data"]
    owned = api.get("/v1/requests/analytics", params={"metric": "usage"}).json()["data"]
    assert (usage["total"], owned["total"]) == (0, 15)


def test_another_project_sees_none_of_a_project_s_datasets_or_experiments(
    api: TestClient, other: TestClient
) -> None:
    assert api.post("/v1/datasets", json={"name": "private-set"}).status_code == 201
    items = {"items": [{"id": "i1", "input_variables": {"x": 1}}]}
    assert api.post("/v1/datasets/private-set/items", json=items).status_code == 201
    made = api.post("/v1/experiments", json={"dataset": "private-set", "task": "client"})
    assert made.status_code == 201, made.text
    experiment_id = made.json()["data"]["id"]
    dataset_id = made.json()["data"]["dataset_id"]
    results = {"results": [{"item_id": "i1", "output": "secret", "scores": {"ok": 1}}]}
    assert api.post(f"/v1/experiments/{experiment_id}/results", json=results).status_code == 201

    assert other.get("/v1/datasets").json()["data"] == []
    assert other.get("/v1/experiments").json()["data"] == []
    for ref in ("private-set", dataset_id):
        for answer in (
            other.get(f"/v1/datasets/{ref}"),
            other.get(f"/v1/datasets/{ref}/items"),
            other.post(f"/v1/datasets/{ref}/items", json=items),
            other.delete(f"/v1/datasets/{ref}/items/i1"),
            other.delete(f"/v1/datasets/{ref}"),
            other.post("/v1/experiments", json={"dataset": ref, "task": "client"}),
        ):
            assert answer.status_code == 404, answer.text
            assert answer.json()["error"]["code"] == "DATASET_NOT_FOUND"
    for answer in (
        other.get(f"/v1/experiments/{experiment_id}"),
        other.get(f"/v1/experiments/{experiment_id}/results"),
        other.post(f"/v1/experiments/{experiment_id}/results", json=results),
        other.post(f"/v1/experiments/{experiment_id}/cancel"),
        other.post(f"/v1/experiments/{experiment_id}/complete"),
        other.get(
            "/v1/experiments/compare", params={"base": experiment_id, "candidate": experiment_id}
        ),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == "EXPERIMENT_NOT_FOUND"
    # The other project's own dataset of the same name is its own.
    assert other.post("/v1/datasets", json={"name": "private-set"}).status_code == 201
    assert other.get("/v1/datasets/private-set").json()["data"]["item_count"] == 0
    # The owner's data is untouched.
    mine = api.get(f"/v1/experiments/{experiment_id}/results").json()["data"]
    assert [r["output"] for r in mine] == ["secret"]
    assert api.get("/v1/datasets/private-set").json()["data"]["item_count"] == 1


def test_another_project_sees_and_changes_none_of_a_project_s_scores_configs_or_tokens(
    api: TestClient, other: TestClient, other_key: str
) -> None:
    logged = api.post("/v1/requests", json={"model": "m", "output": "private", "id": "req_t1"})
    assert logged.status_code == 201, logged.text
    owner_config = {"data_type": "numeric", "min": 0, "max": 1}
    assert api.put("/v1/score-configs/quality", json=owner_config).status_code == 200
    made = api.post("/v1/scores", json={"request_id": "req_t1", "name": "quality", "value": 0.9})
    assert made.status_code == 201, made.text
    score = made.json()["data"]
    minted = api.post("/v1/scores/tokens", json={"request_id": "req_t1", "name": "thumb"})
    assert minted.status_code == 201, minted.text
    owner_token = minted.json()["data"]["url"]
    assert api.post(owner_token, json={"value": True}).status_code == 201

    def owner_view() -> tuple[Any, ...]:
        scores = api.get("/v1/scores").json()["data"]
        detail = api.get("/v1/requests/req_t1").json()["data"]["scores"]
        listed = api.get("/v1/requests", params={"score.quality.min": 0.5}).json()["data"]
        mean = api.get(
            "/v1/requests/analytics", params={"metric": "score", "score_name": "quality"}
        ).json()["data"]
        configs = api.get("/v1/score-configs").json()["data"]
        return scores, detail, [r["id"] for r in listed], mean["total"], configs

    before = owner_view()
    assert before[2] == ["req_t1"] and before[3] == 0.9 and len(before[0]) == 2

    # The other project reads none of it: not by id, not listed, not filtered, not summed.
    for answer in (
        other.get(f"/v1/scores/{score['id']}"),
        other.delete(f"/v1/scores/{score['id']}"),
    ):
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "SCORE_NOT_FOUND"
    assert other.get("/v1/scores").json()["data"] == []
    assert other.get("/v1/scores", params={"request_id": "req_t1"}).json()["data"] == []
    assert other.get("/v1/score-configs").json()["data"] == []
    assert other.get("/v1/requests", params={"score.quality.min": 0}).json()["data"] == []
    assert other.get("/v1/requests", params={"unscored": "quality"}).json()["data"] == []
    theirs = other.get(
        "/v1/requests/analytics", params={"metric": "score", "score_name": "quality"}
    )
    assert theirs.json()["data"]["score_count"] == 0
    # What it writes under the same id, name and record, and its own config of the name, are
    # its own: a score outside the owner's range, a vote through a token of its own key.
    clash = {"id": score["id"], "request_id": "req_t1", "name": "quality", "value": 7}
    assert other.post("/v1/scores", json=clash).status_code == 201
    assert other.post("/v1/scores/batch", json={"scores": [clash]}).status_code == 201
    assert other.put("/v1/score-configs/quality", json={"data_type": "boolean"}).status_code == 200
    theirs_minted = other.post("/v1/scores/tokens", json={"request_id": "req_t1", "name": "thumb"})
    assert theirs_minted.status_code == 201, theirs_minted.text
    assert other.post(theirs_minted.json()["data"]["url"], json={"value": False}).status_code == 201
    assert owner_view() == before
    # Revoking the other project's key ends its tokens, never the owner's.
    api.app.state.services.keys.revoke(other_key)
    refused = api.post(theirs_minted.json()["data"]["url"], json={"value": True})
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "INVALID_FEEDBACK_TOKEN"
    assert api.post(owner_token, json={"value": True}).status_code == 201
    after = owner_view()[0]
    assert [(s["id"], s["value"]) for s in after] == [(s["id"], s["value"]) for s in before[0]]
