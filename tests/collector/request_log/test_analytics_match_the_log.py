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

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.services.rollups import plan_period
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.rollups import BucketState
from tests.collector.request_log.analytics_steps import DATA, PERIOD, batch
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

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
def rollup_api(rollup_settings: Settings) -> Iterator[TestClient]:
    """The collector over ASGI, project default, with its sealer ready to be driven."""
    with TestClient(create_app(rollup_settings), headers=DEFAULT_AUTH) as client:
        yield client


def services(rollup_api: TestClient) -> Services:
    found: Services = rollup_api.app.state.services  # type: ignore[attr-defined]
    return found


def answers(
    rollup_api: TestClient, period: dict[str, str] = PERIOD, queries: list[dict[str, Any]] = QUERIES
) -> list[dict[str, Any]]:
    """Every query's whole answer, floats rounded (sums may add up in another order)."""
    out = []
    for query in queries:
        response = rollup_api.get("/v1/requests/analytics", params={**period, **query})
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


def from_rollup(
    rollup_api: TestClient, start: str = "2026-07-01", end: str = "2026-07-02T23:59:59.999"
) -> tuple[int, int]:
    """How many days and hours of the period an analytics query now reads from the rollup."""
    plan = services(rollup_api).rollups.plan(
        "default", datetime.fromisoformat(start).replace(tzinfo=UTC),
        datetime.fromisoformat(end).replace(tzinfo=UTC),
    )  # fmt: skip
    days = sum((b - a) // timedelta(days=1) for a, b in plan.days)
    return days, sum((b - a) // timedelta(hours=1) for a, b in plan.hours)


def test_sealed_hours_answer_exactly_what_the_log_answers(rollup_api: TestClient) -> None:
    batch(rollup_api, DATA)
    from_log = answers(rollup_api)
    assert from_rollup(rollup_api) == (0, 0)

    assert services(rollup_api).rollups.seal_due() == 5  # 3 hours, 2 days

    assert from_rollup(rollup_api) == (2, 0)
    assert answers(rollup_api) == from_log
    # Grouped by hour, whole days are read as their hours.
    assert services(rollup_api).analytics.plan(
        "default",
        "hour",
        RequestFilter(),
        datetime(2026, 7, 1, tzinfo=UTC),
        datetime(2026, 7, 3, tzinfo=UTC) - timedelta(milliseconds=1),
    ).hours == [
        (datetime(2026, 7, 1, 10, tzinfo=UTC), datetime(2026, 7, 1, 12, tzinfo=UTC)),
        (datetime(2026, 7, 2, 9, tzinfo=UTC), datetime(2026, 7, 2, 10, tzinfo=UTC)),
    ]
    assert services(rollup_api).rollups.seal_due() == 0  # nothing touched since


def test_metadata_groups_read_sealed_days_as_the_log_groups_them(rollup_api: TestClient) -> None:
    others = [
        {"prompt_name": "c", "latency_ms": 50, "metadata": {"env": "prod"},
         "usage": {"prompt_tokens": 7, "completion_tokens": 1, "estimated_cost_usd": 0.125},
         "created_at": "2026-07-02T09:30:00Z"},
        {"prompt_name": "c", "latency_ms": 70, "metadata": {"team": ""}, "status": "error",
         "created_at": "2026-07-01T23:59:59.999Z"},
    ]  # fmt: skip
    batch(rollup_api, DATA + others)
    queries: list[dict[str, Any]] = [
        {"metric": metric, "group_by": f"metadata.{key}"}
        for metric in ("cost", "usage", "latency", "errors")
        for key in ("team", "env", "absent")
    ]
    # The whole period (two sealed days), and one whose first day is cut (read from the log).
    periods = [PERIOD, {"start_date": "2026-07-01T10:30:00Z", "end_date": "2026-07-02"}]
    from_log = [answers(rollup_api, period, queries) for period in periods]

    services(rollup_api).rollups.seal_due()

    assert [answers(rollup_api, period, queries) for period in periods] == from_log
    by_team = from_log[0][queries.index({"metric": "usage", "group_by": "metadata.team"})]
    assert [(g["name"], g["count"]) for g in by_team["groups"]] == [("x", 2), ("", 2), ("y", 1)]
    plan = services(rollup_api).analytics.plan(
        "default", "metadata.team", RequestFilter(), datetime(2026, 7, 1, tzinfo=UTC),
        datetime(2026, 7, 3, tzinfo=UTC) - timedelta(milliseconds=1),
    )  # fmt: skip
    assert (plan.days, plan.hours, plan.raw) == (
        [(datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 7, 3, tzinfo=UTC))],
        [],
        [],
    )


def test_a_retried_batch_changes_nothing_before_or_after_resealing(rollup_api: TestClient) -> None:
    batch(rollup_api, [{**r, "id": f"req_r{i}"} for i, r in enumerate(DATA)])
    services(rollup_api).rollups.seal_due()
    expected = answers(rollup_api)

    batch(
        rollup_api, [{**r, "id": f"req_r{i}"} for i, r in enumerate(DATA)]
    )  # copies of every record

    assert from_rollup(rollup_api) == (0, 0)  # touched again: the copies' hours read from the log
    assert answers(rollup_api) == expected
    assert services(rollup_api).rollups.seal_due() == 5
    assert from_rollup(rollup_api) == (2, 0)
    assert answers(rollup_api) == expected


def test_a_delete_after_sealing_removes_its_records_at_once_and_for_good(
    rollup_api: TestClient,
) -> None:
    batch(rollup_api, DATA)
    services(rollup_api).rollups.seal_due()

    response = rollup_api.request("DELETE", "/v1/requests", json={"metadata": {"team": "y"}})
    assert response.json()["data"]["deleted_count"] == 1

    after_delete = answers(rollup_api)
    total = after_delete[QUERIES.index({"metric": "cost"})]["total"]
    assert total == pytest.approx(1.25)  # 1.75 less the deleted record's 0.5
    services(rollup_api).rollups.seal_due()
    assert from_rollup(rollup_api) == (2, 0)  # the emptied hour is sealed too (with no rows)
    assert answers(rollup_api) == after_delete


def test_a_late_record_counts_at_once_in_a_sealed_hour(rollup_api: TestClient) -> None:
    batch(rollup_api, DATA)
    services(rollup_api).rollups.seal_due()
    late = {**DATA[0], "id": "req_late", "created_at": "2026-07-01T10:59:59.999Z"}

    batch(rollup_api, [late])

    assert from_rollup(rollup_api) == (1, 1)  # July 2nd whole, 11:00; 10:00 from the log
    total = answers(rollup_api)[QUERIES.index({"metric": "cost"})]["total"]
    assert total == pytest.approx(2.0)
    services(rollup_api).rollups.seal_due()
    assert answers(rollup_api)[QUERIES.index({"metric": "cost"})]["total"] == pytest.approx(2.0)


def test_the_period_may_start_and_end_inside_sealed_hours(rollup_api: TestClient) -> None:
    batch(rollup_api, DATA)
    services(rollup_api).rollups.seal_due()
    # 10:15 falls before the start, 11:45 inside, 09:00 on the last millisecond of the end.
    period = {"start_date": "2026-07-01T10:30:00Z", "end_date": "2026-07-02T09:00:00.000Z"}

    data = answers(rollup_api, period)[QUERIES.index({"metric": "cost"})]

    assert data["total"] == pytest.approx(1.5)
    sealed = from_rollup(rollup_api, "2026-07-01T10:30:00", "2026-07-02T09:00:00")
    assert sealed == (0, 1)  # 11:00; the two edge hours read from the log


def test_the_sealer_runs_in_the_background(rollup_settings: Settings) -> None:
    fast = rollup_settings.model_copy(update={"rollup_interval_seconds": 0.05})
    with TestClient(create_app(fast), headers=DEFAULT_AUTH) as rollup_api:
        batch(rollup_api, DATA)
        deadline = time.monotonic() + 30
        while from_rollup(rollup_api) != (2, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert from_rollup(rollup_api) == (2, 0)


def test_hours_written_within_the_settle_time_are_not_sealed(settings: Settings) -> None:
    headers = DEFAULT_AUTH
    with TestClient(create_app(settings), headers=headers) as rollup_api:  # default settle: 60 s
        batch(rollup_api, DATA)

        assert services(rollup_api).rollups.seal_due() == 0
        assert from_rollup(rollup_api) == (0, 0)


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
    headers = DEFAULT_AUTH
    with TestClient(create_app(rollup_settings), headers=headers) as rollup_api:
        from_log = answers(rollup_api)
        assert from_log[QUERIES.index({"metric": "cost"})]["total"] == pytest.approx(1.75)

        assert services(rollup_api).rollups.seal_due() == 5  # the upgrade marked their hours

        assert answers(rollup_api) == from_log


def test_the_plan_reads_settled_whole_buckets_from_the_rollup_and_the_rest_from_the_log() -> None:
    day = datetime(2026, 7, 1, tzinfo=UTC)
    h, d = timedelta(hours=1), timedelta(days=1)
    second = timedelta(seconds=1)
    hours = [
        BucketState(day + 10 * h, touched_at=day + d, sealed_at=day + d + h),  # settled
        BucketState(day + 11 * h, touched_at=day + d, sealed_at=day + d + h),  # settled
        BucketState(day + 12 * h, touched_at=day + 2 * d, sealed_at=day + d + h),  # stale
        BucketState(day + 13 * h, touched_at=day + 2 * d, sealed_at=None),  # never sealed
        BucketState(day + 15 * h, touched_at=day + d, sealed_at=day + d + second),
        BucketState(day + d + 5 * h, touched_at=day + 2 * d, sealed_at=day + 3 * d),
        BucketState(day + 2 * d + 1 * h, touched_at=day + 3 * d, sealed_at=day + 4 * d),
    ]
    days = [
        BucketState(day, touched_at=day + 2 * d, sealed_at=day + d),  # stale: read by hour
        BucketState(day + d, touched_at=day + 2 * d, sealed_at=day + 3 * d),  # settled
        BucketState(day + 2 * d, touched_at=day + 3 * d, sealed_at=day + 4 * d),  # settled
    ]
    start, end = day + 10 * h + 30 * timedelta(minutes=1), day + 2 * d + 12 * h

    plan = plan_period(hours, days, start, end, settle=timedelta(0))

    assert plan.days == [(day + d, day + 2 * d)]  # the third day is cut by the period's end
    assert plan.hours == [
        (day + 11 * h, day + 12 * h),
        (day + 15 * h, day + 16 * h),
        (day + 2 * d + h, day + 2 * d + 2 * h),
    ]
    assert plan.raw == [(start, day + 11 * h), (day + 12 * h, day + 14 * h)]
    # Sealed less than the settle time after the last touch: not trusted.
    assert (day + 15 * h, day + 16 * h) not in plan_period(
        hours, days, start, end, settle=2 * second
    ).hours
