"""Analytics of one prompt: its latency percentiles by version, as a dashboard asks for them.

A query naming one prompt reads its sealed buckets from the rollup's copy keyed by prompt
(migration 41). The percentiles must match exact nearest-rank ones within the documented bound
(docs/api-notes.md, "Analytics") over sealed and unsealed spans, after an upgrade that copied
the rows sealed before, and with rows the copy holds twice.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.rollups import RollupService
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.request_log.analytics_steps import batch, queries_seen, sealed_spans, services
from tests.collector.upgrades import backfill, store_before
from tests.keys import DEFAULT_AUTH

# A percentile keeps 8 significant bits of the latency, the rest cut off: never above the
# exact nearest-rank value, and less than 2^-7 of it below (docs/api-notes.md, "Analytics").
BOUND = 2**-7

FIRST = datetime(2026, 7, 1, tzinfo=UTC)
# From 05:30 on July 1st (its partial hour read from the log, the rest of the day as sealed
# hours) through July 2nd (a sealed day) to 12:45 on July 3rd (sealed hours, then a partial
# one from the log).
PERIOD = {"start_date": "2026-07-01T05:30:00Z", "end_date": "2026-07-03T12:45:00Z"}
START, END = datetime(2026, 7, 1, 5, 30, tzinfo=UTC), datetime(2026, 7, 3, 12, 45, tzinfo=UTC)


def records() -> list[dict[str, Any]]:
    """600 model calls 7 minutes apart from July 1st: prompts a and b, versions 1-3, and
    latencies from 1 ms to 20 s with uneven gaps (many of them not 8-bit numbers)."""
    return [
        {
            "id": f"req_one{i:04d}",
            "prompt_name": "a" if i % 4 else "b",
            "version": 1 + (i // 4) % 3,
            "model": "gpt-4o" if i % 5 else "claude-sonnet-4",
            "status": "error" if i % 11 == 0 else "success",
            "latency_ms": 1 + (37 * i + i * i) % 20_000,
            "created_at": (FIRST + timedelta(minutes=7 * i)).isoformat().replace("+00:00", "Z"),
        }
        for i in range(600)
    ]


def exact(latencies: list[int], level: int) -> int:
    """The nearest-rank percentile: the smallest latency with ``level`` % at or below it."""
    return sorted(latencies)[math.ceil(level * len(latencies) / 100) - 1]


def in_period(record: dict[str, Any]) -> bool:
    created = datetime.fromisoformat(record["created_at"])
    return START <= created <= END


def assert_matches_exact(data: dict[str, Any], logged: list[dict[str, Any]]) -> None:
    """Each version's count and percentiles are those of prompt a's records in the period."""
    by_version: dict[str, list[int]] = {}
    for record in logged:
        if record["prompt_name"] == "a" and in_period(record):
            by_version.setdefault(str(record["version"]), []).append(record["latency_ms"])
    groups = {g["name"]: g for g in data["groups"]}
    assert sorted(groups) == sorted(by_version)
    for version, latencies in by_version.items():
        assert groups[version]["count"] == len(latencies)
        for level in (50, 95, 99):
            want = exact(latencies, level)
            assert want * (1 - BOUND) < groups[version][f"p{level}"] <= want, (version, level)


def by_version(api: TestClient) -> dict[str, Any]:
    response = api.get(
        "/v1/requests/analytics",
        params={**PERIOD, "metric": "latency", "group_by": "version", "prompt_name": "a"},
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.mark.cost
def test_one_prompts_percentiles_by_version_match_the_exact_ones_sealed_or_not(
    rollup_settings: Settings,
) -> None:
    logged = records()
    with TestClient(create_app(rollup_settings), headers=DEFAULT_AUTH) as api:
        batch(api, logged)
        from_log = by_version(api)
        assert_matches_exact(from_log, logged)

        services(api).rollups.seal_due()

        # July 1st from 06:00 and July 3rd to 12:00 as hours, July 2nd as a day, two edges.
        assert sealed_spans(api, START, END) == (1, 18 + 12, 2)
        with queries_seen(api) as seen:
            sealed = by_version(api)
        assert sealed == from_log  # the same states, merged in another order
        (answer,) = [sql for sql in seen if "GROUPING SETS" in sql]
        # The sealed spans are read from the copy keyed by prompt, never the period's rows of
        # every prompt.
        assert answer.count("request_rollup_by_prompt") == 2
        assert "request_rollup`" not in answer


def test_rows_sealed_before_the_upgrade_are_copied_and_read_once(rollup_settings: Settings) -> None:
    logged = records()
    rows = [
        RequestRow(
            id=r["id"],
            created_at=datetime.fromisoformat(r["created_at"]),
            prompt_name=r["prompt_name"],
            version=r["version"],
            model=r["model"],
            status=r["status"],
            latency_ms=r["latency_ms"],
        )
        for r in logged
    ]
    store_before(rollup_settings, 41, rows)
    # A collector of the release before seals every hour and day (no copy keyed by prompt yet).
    store = Store(open_client(rollup_settings.store_url), rollup_settings.database)
    try:
        sealer = RollupService(store.rollups, settle=timedelta(0), interval=30)
        assert sealer.seal_due() > 0
    finally:
        store.close()

    with TestClient(create_app(rollup_settings), headers=DEFAULT_AUTH) as api:
        assert sealed_spans(api, START, END) == (1, 30, 2)  # the upgrade kept every seal
        upgraded = by_version(api)
        assert_matches_exact(upgraded, logged)

        # The copy made again (a start-up that stopped before recording the migration, or a
        # seal the view copied while the migration copied it too): each row is there twice.
        services(api).store.client.command(backfill(rollup_settings, "rollup_by_prompt"))

        assert by_version(api) == upgraded
