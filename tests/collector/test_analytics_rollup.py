"""The analytics rollup: sealed hours answer exactly what the log answers, whatever happens.

Every test compares the whole analytics answer (total, groups, counts, percentiles) read
from the log alone with the same answer once hours are sealed, across retries, deletes, late
records, partial hours at the period's edges and an upgrade from a store without the rollup.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.api.deps import Services
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.rollups import plan_period
from promptrail.collector.store.requests import RequestRow
from promptrail.collector.store.rollups import HourState
from tests.collector.test_delete_and_analytics import DATA, PERIOD, batch
from tests.collector.upgrades import store_before

# Every metric with every group the rollup serves, and filters it serves.
QUERIES: list[dict[str, Any]] = [
    {"metric": metric, "group_by": group_by}
    for metric in ("cost", "usage", "latency", "errors")
    for group_by in ("prompt_name", "model", "status", "version", "day", "hour")
] + [
    {"metric": "cost"},
    {"metric": "usage", "group_by": "hour", "filters": json.dumps({"model": "gpt-4o"})},
    {"metric": "latency", "group_by": "model", "filters": json.dumps({"status": "success"})},
    {"metric": "errors", "group_by": "day", "filters": json.dumps({"prompt_name": "a"})},
    # Metadata is not in the rollup: these read the log, sealed hours or not.
    {"metric": "usage", "group_by": "metadata.team"},
    {"metric": "cost", "filters": json.dumps({"metadata": {"team": "x"}})},
]


@pytest.fixture
def rollup_settings(settings: Settings) -> Settings:
    """A collector that may seal an hour as soon as nothing touches it (no settle time)."""
    return settings.model_copy(update={"rollup_settle_seconds": 0.0})


@pytest.fixture
def api(rollup_settings: Settings) -> Iterator[TestClient]:
    """The collector over ASGI, project default, with its sealer ready to be driven."""
    with TestClient(
        create_app(rollup_settings), headers={"Authorization": "Bearer pr-test-default-key"}
    ) as client:
        yield client


def services(api: TestClient) -> Services:
    found: Services = api.app.state.services  # type: ignore[attr-defined]
    return found


def answers(api: TestClient, period: dict[str, str] = PERIOD) -> list[dict[str, Any]]:
    """Every query's whole answer, floats rounded (sums may add up in another order)."""
    out = []
    for query in QUERIES:
        response = api.get("/v1/requests/analytics", params={**period, **query})
        assert response.status_code == 200, response.text
        out.append(_rounded(response.json()["data"]))
    return out


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def sealed_hours(api: TestClient, start: str = "2026-07-01", end: str = "2026-07-03") -> int:
    """How many hours of the period the next analytics query reads from the rollup."""
    plan = services(api).rollups.plan(
        "default", datetime.fromisoformat(start).replace(tzinfo=UTC),
        datetime.fromisoformat(end).replace(tzinfo=UTC),
    )  # fmt: skip
    return sum((b - a) // timedelta(hours=1) for a, b in plan.sealed)


def test_sealed_hours_answer_exactly_what_the_log_answers(api: TestClient) -> None:
    batch(api, DATA)
    from_log = answers(api)
    assert sealed_hours(api) == 0

    assert services(api).rollups.seal_due() == 3

    assert sealed_hours(api) == 3
    assert answers(api) == from_log
    assert services(api).rollups.seal_due() == 0  # nothing touched since


def test_a_retried_batch_changes_nothing_before_or_after_resealing(api: TestClient) -> None:
    batch(api, [{**r, "id": f"req_r{i}"} for i, r in enumerate(DATA)])
    services(api).rollups.seal_due()
    expected = answers(api)

    batch(api, [{**r, "id": f"req_r{i}"} for i, r in enumerate(DATA)])  # copies of every record

    assert sealed_hours(api) == 0  # touched again: the copies' hours read from the log
    assert answers(api) == expected
    assert services(api).rollups.seal_due() == 3
    assert sealed_hours(api) == 3
    assert answers(api) == expected


def test_a_delete_after_sealing_removes_its_records_at_once_and_for_good(api: TestClient) -> None:
    batch(api, DATA)
    services(api).rollups.seal_due()

    response = api.request("DELETE", "/v1/requests", json={"metadata": {"team": "y"}})
    assert response.json()["data"]["deleted_count"] == 1

    after_delete = answers(api)
    total = after_delete[QUERIES.index({"metric": "cost"})]["total"]
    assert total == pytest.approx(1.25)  # 1.75 less the deleted record's 0.5
    services(api).rollups.seal_due()
    assert sealed_hours(api) == 3  # the emptied hour is sealed too (with no rows)
    assert answers(api) == after_delete


def test_a_late_record_counts_at_once_in_a_sealed_hour(api: TestClient) -> None:
    batch(api, DATA)
    services(api).rollups.seal_due()
    late = {**DATA[0], "id": "req_late", "created_at": "2026-07-01T10:59:59.999Z"}

    batch(api, [late])

    total = answers(api)[QUERIES.index({"metric": "cost"})]["total"]
    assert total == pytest.approx(2.0)
    services(api).rollups.seal_due()
    assert answers(api)[QUERIES.index({"metric": "cost"})]["total"] == pytest.approx(2.0)


def test_the_period_may_start_and_end_inside_sealed_hours(api: TestClient) -> None:
    batch(api, DATA)
    services(api).rollups.seal_due()
    # 10:15 falls before the start, 11:45 inside, 09:00 on the last millisecond of the end.
    period = {"start_date": "2026-07-01T10:30:00Z", "end_date": "2026-07-02T09:00:00.000Z"}

    data = answers(api, period)[QUERIES.index({"metric": "cost"})]

    assert data["total"] == pytest.approx(1.5)
    sealed = sealed_hours(api, "2026-07-01T10:30:00", "2026-07-02T09:00:00")
    assert sealed == 1  # 11:00; the two edge hours read from the log


def test_the_sealer_runs_in_the_background(rollup_settings: Settings) -> None:
    fast = rollup_settings.model_copy(update={"rollup_interval_seconds": 0.05})
    with TestClient(
        create_app(fast), headers={"Authorization": "Bearer pr-test-default-key"}
    ) as api:
        batch(api, DATA)
        deadline = time.monotonic() + 30
        while sealed_hours(api) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sealed_hours(api) == 3


def test_hours_written_within_the_settle_time_are_not_sealed(settings: Settings) -> None:
    headers = {"Authorization": "Bearer pr-test-default-key"}
    with TestClient(create_app(settings), headers=headers) as api:  # default settle: 60 s
        batch(api, DATA)

        assert services(api).rollups.seal_due() == 0
        assert sealed_hours(api) == 0


def test_records_stored_before_the_rollup_are_sealed_after_the_upgrade(
    rollup_settings: Settings,
) -> None:
    rows = [
        RequestRow(
            id=f"old{i}",
            created_at=datetime.fromisoformat(r["created_at"]),
            prompt_name=r["prompt_name"],
            version=r["version"],
            model=r["model"],
            status=r.get("status", "success"),
            prompt_tokens=r["usage"]["prompt_tokens"],
            completion_tokens=r["usage"]["completion_tokens"],
            total_tokens=r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"],
            estimated_cost_usd=r["usage"]["estimated_cost_usd"],
            latency_ms=r["latency_ms"],
            metadata=r["metadata"],
        )
        for i, r in enumerate(DATA)
    ]
    store_before(rollup_settings, 7, rows)
    headers = {"Authorization": "Bearer pr-test-default-key"}
    with TestClient(create_app(rollup_settings), headers=headers) as api:
        from_log = answers(api)
        assert from_log[QUERIES.index({"metric": "cost"})]["total"] == pytest.approx(1.75)

        assert services(api).rollups.seal_due() == 3  # the upgrade marked their hours

        assert answers(api) == from_log


def test_the_plan_reads_settled_whole_hours_from_the_rollup_and_the_rest_from_the_log() -> None:
    hour = datetime(2026, 7, 1, 10, tzinfo=UTC)
    h = timedelta(hours=1)
    second = timedelta(seconds=1)
    states = [
        HourState(hour, touched_at=hour + 2 * h, sealed_at=hour + 3 * h),  # settled
        HourState(hour + h, touched_at=hour + 2 * h, sealed_at=hour + 3 * h),  # settled
        HourState(hour + 2 * h, touched_at=hour + 4 * h, sealed_at=hour + 3 * h),  # stale
        HourState(hour + 3 * h, touched_at=hour + 4 * h, sealed_at=None),  # never sealed
        HourState(hour + 5 * h, touched_at=hour + 6 * h, sealed_at=hour + 6 * h + second),
    ]
    start, end = hour + 30 * timedelta(minutes=1), hour + 6 * h

    plan = plan_period(states, start, end, settle=timedelta(0))

    assert plan.sealed == [(hour + h, hour + 2 * h), (hour + 5 * h, hour + 6 * h)]
    assert plan.raw == [(start, hour + h), (hour + 2 * h, hour + 4 * h)]
    # Sealed less than the settle time after the last touch: not trusted.
    assert plan_period(states, start, end, settle=2 * second).sealed == [(hour + h, hour + 2 * h)]
