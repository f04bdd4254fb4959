"""The direct writes of datasets, experiments and keys go through one insert answering Stored or
a typed refusal (issue 46 point 1), as the scores' do: each store answers ``Refused`` when the
store cannot take a write (ClickHouse's own TOO_MANY_PARTS on the real table, never a fake) and
``STORED`` once it can again, and each route still answers the outage with the same 503
STORE_UNAVAILABLE, its body and the collector's ``Retry-After``, having stored nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.keys import hash_key
from promptrail.collector.store.datasets import ItemRow
from promptrail.collector.store.experiments import ResultRow
from promptrail.collector.store.keys import SCOPES, NewKey
from promptrail.collector.store.writes import STORED, Refused, WriteOutcome
from tests.collector.outages import RETRY_AFTER, assert_store_unavailable, failing_inserts
from tests.keys import DEFAULT_AUTH

ALL = frozenset(SCOPES)

ADMIN_TOKEN = "test-admin-token"


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """A collector whose refusals ask the client back in RETRY_AFTER seconds."""
    settings = settings.model_copy(update={"store_retry_after_seconds": RETRY_AFTER})
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as client:
        yield client


def post(api: TestClient, path: str, body: dict[str, Any], status: int = 201) -> Any:
    response = api.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()["data"]


def assert_refused(outcome: WriteOutcome) -> None:
    assert isinstance(outcome, Refused)
    assert not outcome.busy  # failing, not slower than arrivals: STORE_UNAVAILABLE
    assert "TOO_MANY_PARTS" in outcome.message


def item_ids(api: TestClient) -> list[str]:
    response = api.get("/v1/datasets/qa/items")
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]]


def test_a_dataset_item_post_answers_an_outage_with_the_same_503(api: TestClient) -> None:
    dataset = post(api, "/v1/datasets", {"name": "qa"})
    post(api, "/v1/datasets/qa/items", {"items": [{"id": "a", "input_variables": {"n": 1}}]})
    post(api, "/v1/datasets/qa/items", {"items": [{"id": "b", "input_variables": {"n": 2}}]})
    item = {"id": "c", "input_variables": {"n": 3}}
    with failing_inserts(api, "dataset_items"):
        assert_store_unavailable(api.post("/v1/datasets/qa/items", json={"items": [item]}))
        assert_store_unavailable(api.delete("/v1/datasets/qa/items/a"))
    assert item_ids(api) == ["a", "b"]  # nothing refused was stored
    post(api, "/v1/datasets/qa/items", {"items": [item]})
    assert item_ids(api) == ["a", "b", "c"]

    store = api.app.state.services.store.datasets
    row = ItemRow("d", 0, {"n": 4}, None, {}, None, datetime.now(UTC))
    with failing_inserts(api, "dataset_items"):
        assert_refused(store.put_items("default", dataset["id"], [row]))
    assert item_ids(api) == ["a", "b", "c"]
    assert store.put_items("default", dataset["id"], [row]) == STORED
    assert item_ids(api) == ["a", "b", "c", "d"]


def test_an_experiment_results_post_answers_an_outage_with_the_same_503(
    api: TestClient,
) -> None:
    post(api, "/v1/datasets", {"name": "qa"})
    items = [{"id": f"i{n}", "input_variables": {"n": n}} for n in range(3)]
    post(api, "/v1/datasets/qa/items", {"items": items})
    made = post(api, "/v1/experiments", {"dataset": "qa", "task": "client"})
    results = f"/v1/experiments/{made['id']}/results"

    def result(item: str) -> dict[str, Any]:
        return {
            "item_id": item,
            "repetition": 1,
            "output": f"out-{item}",
            "request_id": f"req_{item}_{made['id']}",
            "scores": {"quality": 0.5},
        }

    post(api, results, {"results": [result("i0")]})
    post(api, results, {"results": [result("i1")]})
    with failing_inserts(api, "experiment_results"):
        assert_store_unavailable(api.post(results, json={"results": [result("i2")]}))

    def stored() -> list[str]:
        response = api.get(results)
        assert response.status_code == 200, response.text
        return [r["item_id"] for r in response.json()["data"]]

    # Neither the result nor its verdict's score on its record was stored.
    assert stored() == ["i0", "i1"]
    verdicts = api.get("/v1/scores", params={"request_id": result("i2")["request_id"]})
    assert verdicts.json()["data"] == []
    assert api.get(f"/v1/experiments/{made['id']}").json()["data"]["counts"]["done"] == 2
    post(api, results, {"results": [result("i2")]})
    assert stored() == ["i0", "i1", "i2"]

    store = api.app.state.services.store.experiments
    again = ResultRow("i0", 1, 0, None, None, {"n": 0}, None, "again", "success", "")
    with failing_inserts(api, "experiment_results"):
        assert_refused(store.put_results("default", made["id"], [again]))
    assert store.results("default", made["id"])[0].output == "out-i0"
    assert store.put_results("default", made["id"], [again]) == STORED
    assert store.results("default", made["id"])[0].output == "again"


def test_a_key_create_answers_an_outage_with_the_same_503(api: TestClient) -> None:
    api.app.state.admin_token = ADMIN_TOKEN
    admin = TestClient(api.app, headers={"X-Promptrail-Admin": ADMIN_TOKEN})

    def keys() -> list[str]:
        response = admin.get("/v1/admin/keys", params={"project": "team"})
        assert response.status_code == 200, response.text
        return [key["key_id"] for key in response.json()["data"]]

    first = post(admin, "/v1/admin/keys", {"project": "team"})["api_key"]
    before = keys()
    with failing_inserts(api, "api_keys"):
        assert_store_unavailable(admin.post("/v1/admin/keys", json={"project": "team"}))
    assert keys() == before  # no key was stored (nor shown)
    assert api.get("/v1/requests", headers={"Authorization": f"Bearer {first}"}).is_success
    post(admin, "/v1/admin/keys", {"project": "team"})
    assert len(keys()) == 2

    store = api.app.state.services.store.keys
    digest = hash_key("pr-made-by-the-store-test")
    with failing_inserts(api, "api_keys"):
        assert_refused(store.insert(NewKey(digest, "team", "pr-made-", datetime.now(UTC), ALL)))
    assert store.state(digest) is None
    assert store.insert(NewKey(digest, "team", "pr-made-", datetime.now(UTC), ALL)) == STORED
    state = store.state(digest)
    assert state is not None and state.project == "team"
