"""Analytics of the cost count the records without a price from the rollup's sums (migration 47).

``cost_unknown_records`` must be the exact count of the period's live records whose model has
no price, for every group and filter the rollup serves, read from the log or from sealed
days and hours, right after a retry, a delete or a late record, and after an upgrade from a
store whose sealed rows carry no such count. Once sealed, the answer is one query: no count
of the log's whole period beside it.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.rollups import RollupService
from promptrail.collector.store import rollups
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.schema import Table
from tests.collector.request_log.analytics_steps import batch, queries_seen, sealed_spans, services
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

FIRST = datetime(2026, 7, 1, tzinfo=UTC)
# From 05:30 on July 1st (a partial hour from the log, then sealed hours) through July 2nd (a
# sealed day) to 12:45 on July 3rd (sealed hours, then a partial one from the log).
PERIOD = {"start_date": "2026-07-01T05:30:00Z", "end_date": "2026-07-03T12:45:00Z"}
START, END = datetime(2026, 7, 1, 5, 30, tzinfo=UTC), datetime(2026, 7, 3, 12, 45, tzinfo=UTC)
PRICED, UNPRICED = "gpt-4o-mini", "my-finetune-xyz"

# Cost queries the rollup serves (every group, and the filters it keeps), and one it does not.
QUERIES: list[dict[str, str]] = [
    {},
    *({"group_by": group} for group in ("day", "hour", "model", "prompt_name", "version")),
    {"group_by": "metadata.team"},
    {"prompt_name": "a"},
    {"filters": json.dumps({"model": UNPRICED})},
    {"status": "error", "group_by": "day"},
    {"filters": json.dumps({"metadata": {"team": "x"}})},
]


def records() -> list[dict[str, Any]]:
    """300 model calls 17 minutes apart from July 1st (past the period's end): one in three
    without a price, prompts a and b, teams x and y, one in seven an error; the 7th marked
    for a delete."""
    out = []
    for i in range(300):
        out.append(
            {
                "id": f"req_unpriced-{i:03d}",
                "created_at": (FIRST + timedelta(minutes=17 * i)).isoformat(),
                "prompt_name": "ab"[i % 2],
                "version": 1 + i % 3,
                "model": UNPRICED if i % 3 == 0 else PRICED,
                "status": "error" if i % 7 == 0 else "success",
                "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                "metadata": {"team": "xy"[i % 4 // 2], **({"mark": "gone"} if i == 6 else {})},
            }
        )
    return out


def matches(record: dict[str, Any], query: dict[str, str]) -> bool:
    """Whether ``query``'s filters (the ones QUERIES use) take ``record``."""
    filters: dict[str, Any] = json.loads(query.get("filters", "{}"))
    wanted = {**filters, **{k: v for k, v in query.items() if k in ("prompt_name", "status")}}
    for key, value in wanted.items():
        if key == "metadata":
            if any(record["metadata"].get(k) != v for k, v in value.items()):
                return False
        elif record.get(key, "success" if key == "status" else None) != value:
            return False
    return True


def expected(logged: list[dict[str, Any]], query: dict[str, str]) -> int:
    """The exact count: live records of the period, filtered, whose model has no price."""
    return sum(
        1
        for r in logged
        if START <= datetime.fromisoformat(r["created_at"]) <= END
        and r["model"] == UNPRICED
        and matches(r, query)
    )


def unknown(api: TestClient, query: dict[str, str]) -> int:
    response = api.get("/v1/requests/analytics", params={"metric": "cost", **PERIOD, **query})
    assert response.status_code == 200, response.text
    count: int = response.json()["data"]["cost_unknown_records"]
    return count


def assert_exact(api: TestClient, logged: list[dict[str, Any]]) -> None:
    for query in QUERIES:
        assert unknown(api, query) == expected(logged, query), query


def test_unpriced_counts_are_exact_from_the_log_and_from_sealed_days_and_hours(
    rollup_settings: Settings,
) -> None:
    logged = records()
    with TestClient(create_app(rollup_settings), headers=DEFAULT_AUTH) as api:
        batch(api, logged)
        assert_exact(api, logged)  # from the log alone

        services(api).rollups.seal_due()
        assert sealed_spans(api, START, END) == (1, 18 + 12, 2)
        assert_exact(api, logged)
        with queries_seen(api) as seen:
            assert unknown(api, {"group_by": "day"}) == expected(logged, {})
        # The count came with the sums: no query of the log's unpriced rows beside them.
        assert not [sql for sql in seen if "cost_known" in sql and "GROUPING SETS" not in sql]

        # A retried copy of an unpriced record, a delete of one, a late one in a sealed hour:
        # their hours are read from the log at once, and the counts stay exact.
        batch(api, [logged[3]])
        gone = logged[6]
        deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"mark": "gone"}})
        assert deleted.json()["data"]["deleted_count"] == 1, deleted.text
        late = {**logged[9], "id": "req_unpriced-late", "created_at": "2026-07-02T13:05:00Z"}
        batch(api, [late])
        now = [r for r in logged if r is not gone] + [late]
        assert_exact(api, now)

        services(api).rollups.seal_due()
        assert sealed_spans(api, START, END) == (1, 18 + 12, 2)
        assert_exact(api, now)


def test_rows_sealed_before_the_count_read_it_from_the_log_after_the_upgrade(
    rollup_settings: Settings,
) -> None:
    logged = records()
    rows = [
        RequestRow(
            id=r["id"],
            created_at=datetime.fromisoformat(r["created_at"]),
            prompt_name=r["prompt_name"],
            version=r["version"],
            model=r["model"],
            status=r["status"],
            metadata=r["metadata"],
            cost_known=r["model"] == PRICED,
        )
        for r in logged
    ]
    database = f"`{rollup_settings.database}`"
    # The release before kept no count: its tables without the column, its view without it.
    old_view = ", ".join(c for c in rollups.REQUEST_ROLLUP.inserted_columns() if c != "unpriced")
    before = [
        f"ALTER TABLE {database}.request_rollup_by_prompt_mv MODIFY QUERY "
        f"SELECT {old_view} FROM {database}.request_rollup",
        *(
            f"ALTER TABLE {database}.{table} DROP COLUMN unpriced"
            for table in ("request_rollup", "request_rollup_by_prompt", "request_rollup_metadata")
        ),
    ]
    store_before(rollup_settings, 47, rows, before)
    # That release's sealer seals every hour and day, summing no count.
    with pytest.MonkeyPatch.context() as patch:
        for name in ("REQUEST_ROLLUP", "REQUEST_ROLLUP_METADATA"):
            table: Table = getattr(rollups, name)
            columns = tuple(c for c in table.columns if not c.startswith("unpriced "))
            patch.setattr(rollups, name, dataclasses.replace(table, columns=columns))
        patch.setattr(rollups, "_SUMMED", rollups._SUMMED.removesuffix(", countIf(NOT cost_known)"))
        store = Store(open_client(rollup_settings.store_url), rollup_settings.database)
        try:
            assert RollupService(store.rollups, settle=timedelta(0), interval=30).seal_due() > 0
        finally:
            store.close()

    with TestClient(create_app(rollup_settings), headers=DEFAULT_AUTH) as api:
        assert sealed_spans(api, START, END) == (1, 18 + 12, 2)  # the upgrade kept every seal
        assert_exact(api, logged)

        # Hours sealed again after the upgrade count in the rollup; the others still read
        # their count from the log: together exact.
        late = {**logged[9], "id": "req_unpriced-late", "created_at": "2026-07-02T13:05:00Z"}
        batch(api, [late])
        services(api).rollups.seal_due()
        assert sealed_spans(api, START, END) == (1, 18 + 12, 2)
        assert_exact(api, [*logged, late])
