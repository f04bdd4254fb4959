"""A run's record is stored behind its answer, and every read still sees it (write-behind).

The store's insert is held back by a gate around the run service's one write of its records
(through the request log's real writer), so the tests see
the order of events without timing anything: the run answers while its record is not yet
stored, and reads of the request log wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.services.runs import RunService
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.writes import WriteOutcome
from tests.collector.runs.steps import create_prompt, run
from tests.keys import DEFAULT_AUTH


class GatedStore:
    """Wraps the run service's write_records: waits for ``gate``, may fail some attempts."""

    def __init__(self, runs: RunService, failures: int = 0) -> None:
        self.gate = threading.Event()
        self.stored = threading.Event()
        self.attempts = 0
        self._failures = failures
        self._write: Callable[[str, Sequence[RequestRow]], WriteOutcome] = runs.write_records

    def __call__(self, project: str, rows: Sequence[RequestRow]) -> WriteOutcome:
        assert self.gate.wait(timeout=30)
        self.attempts += 1
        if self.attempts <= self._failures:
            raise RuntimeError("store unavailable")
        outcome = self._write(project, rows)
        self.stored.set()
        return outcome


@pytest.fixture
def gated(runs_api: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedStore]:
    services: Services = runs_api.app.state.services  # type: ignore[attr-defined]
    gate = GatedStore(services.runs)
    monkeypatch.setattr(services.runs, "write_records", gate)
    yield gate
    gate.gate.set()


def test_a_run_answers_before_its_record_is_stored_and_reads_wait_for_it(
    runs_api: TestClient, gated: GatedStore
) -> None:
    create_prompt(runs_api)

    result = run(runs_api, variables={"name": "Ada"}, metadata={"user_id": "u1"})

    # The answer came back while the insert is still held at the gate.
    assert not gated.stored.is_set()
    with ThreadPoolExecutor(max_workers=1) as pool:
        detail = pool.submit(runs_api.get, f"/v1/requests/{result['id']}")
        # Held by the pending record: without the wait it would answer 404 at once.
        assert not wait([detail], timeout=0.5).done
        gated.gate.set()
        response = detail.result(timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["output"]["content"] == result["output"]
    assert gated.stored.is_set()


def test_every_read_of_the_log_sees_a_finished_run(runs_api: TestClient, gated: GatedStore) -> None:
    create_prompt(runs_api)
    gated.gate.set()

    for _ in range(3):
        result = run(runs_api, variables={"name": "Ada"}, metadata={"user_id": "u7"})
        listed = runs_api.get("/v1/requests", params={"metadata.user_id": "u7"}).json()["data"]
        assert result["id"] in {item["id"] for item in listed}
        found = runs_api.get("/v1/requests/search", params={"query": "Ada"}).json()["data"]
        assert result["id"] in {hit["id"] for hit in found}

    analytics = runs_api.get(
        "/v1/requests/analytics", params={"metric": "usage", "group_by": "prompt_name"}
    ).json()["data"]
    assert [(g["name"], g["count"]) for g in analytics["groups"]] == [("greet", 3)]
    deleted = runs_api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u7"}})
    assert deleted.json()["data"]["deleted_count"] == 3


def test_a_failed_insert_is_retried_until_the_record_is_stored(
    runs_api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    services: Services = runs_api.app.state.services  # type: ignore[attr-defined]
    gate = GatedStore(services.runs, failures=1)
    gate.gate.set()
    monkeypatch.setattr(services.runs, "write_records", gate)
    create_prompt(runs_api)

    result = run(runs_api, variables={"name": "Ada"})

    response = runs_api.get(f"/v1/requests/{result['id']}")
    assert response.status_code == 200, response.text
    assert gate.attempts == 2


def test_a_graceful_stop_stores_the_records_still_pending(run_settings: Settings) -> None:
    headers = DEFAULT_AUTH
    with TestClient(create_app(run_settings), headers=headers) as api:
        services: Services = api.app.state.services  # type: ignore[attr-defined]
        gate = GatedStore(services.runs)
        services.runs.write_records = gate  # type: ignore[method-assign]
        create_prompt(api)
        result = run(api, variables={"name": "Ada"})
        assert not gate.stored.is_set()
        # Shutdown begins while the insert is held; the gate opens once it has begun.
        threading.Timer(0.2, gate.gate.set).start()

    with TestClient(create_app(run_settings), headers=headers) as api:
        response = api.get(f"/v1/requests/{result['id']}")
        assert response.status_code == 200, response.text
        stored: dict[str, Any] = response.json()["data"]
        assert stored["output"]["content"] == result["output"]
