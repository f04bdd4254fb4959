"""The trace list reads its candidates a window of records at a time (the newest few thousand
below the page's position, wider when a window cannot fill the page), so a page reads a
bounded amount of a log of any size (docs/scale.md, "Reads at 100M"). These tests make the
windows a few records wide, so that every page of a small log crosses several, and hold the
list exact through them: traces whose records straddle a window's edge, a late record older
than its trace's start, records in no trace, a deleted trace, and the list's filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.store import traces
from tests.collector.traces.steps import log, span, walk

NOW = datetime.now(UTC).replace(microsecond=0)
LONG = "10" * 16  # a trace whose records span most of the log's time
DOOMED = "d0" * 16  # deleted once logged


def _trace_id(i: int) -> str:
    return f"{i + 0xA0:02x}" * 16


def _records() -> tuple[list[dict[str, Any]], dict[str, tuple[datetime, str]]]:
    """Twelve short traces a minute apart (three records each, 20 s apart; every fourth in
    staging, every third named ``chat``), the long trace's root two hours back with a record
    beside every short one, a deleted trace, and records in no trace between them; with the
    (start, name) of each trace that stays."""
    records: list[dict[str, Any]] = []
    starts: dict[str, tuple[datetime, str]] = {}
    base = NOW - timedelta(hours=1)
    for i in range(12):
        trace, at = _trace_id(i), base + timedelta(minutes=i)
        name = "chat" if i % 3 == 0 else f"agent-{i}"
        env = {"environment": "staging"} if i % 4 == 0 else {}
        records.append(span(trace, 0, at, kind="chain", parent=None, span_name=name, **env))
        records += [span(trace, j, at + timedelta(seconds=20 * j), **env) for j in (1, 2)]
        records.append(span(LONG, 10 + i, at + timedelta(seconds=30)))
        records.append(
            {
                "id": f"req_alone-{i:02d}",
                "created_at": (at + timedelta(seconds=45)).isoformat(),
                "model": "gpt-4o-mini",
            }
        )
        starts[trace] = (at, name)
    long_start = NOW - timedelta(hours=2)
    records.append(span(LONG, 0, long_start, kind="chain", parent=None, span_name="long"))
    starts[LONG] = (long_start, "long")
    records += [span(DOOMED, j, base + timedelta(minutes=5, seconds=j)) for j in range(3)]
    for r in records:
        if r.get("trace_id") == DOOMED:
            r["metadata"] = {"doomed": "yes"}
    return records, starts


def _newest_first(starts: dict[str, tuple[datetime, str]], keep: Any = None) -> list[str]:
    kept = [t for t, (at, name) in starts.items() if keep is None or keep(t, at, name)]
    return sorted(kept, key=lambda t: (starts[t][0], t), reverse=True)


@pytest.mark.parametrize("reach", [(1, 2, 4), (3, 8, 100)])
def test_the_trace_list_is_exact_through_windows_of_a_few_records(
    api: TestClient, monkeypatch: pytest.MonkeyPatch, reach: tuple[int, int, int]
) -> None:
    first, wider, last = reach
    monkeypatch.setattr(traces, "_FIRST_REACH", first)
    monkeypatch.setattr(traces, "_WIDER", wider)
    monkeypatch.setattr(traces, "_LAST_REACH", last)
    records, starts = _records()
    log(api, records)
    log(api, records[5:20])  # retried copies
    deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert deleted.status_code == 200, deleted.text
    # A late record of a short trace, older than its first: the trace's start moves back.
    moved = _trace_id(7)
    late_at = starts[moved][0] - timedelta(minutes=9, seconds=30)
    log(api, [span(moved, 9, late_at)])
    starts[moved] = (late_at, starts[moved][1])

    every = _newest_first(starts)
    for limit in (1, 2, 5, 50):
        listed = walk(api, "/v1/traces", limit, environment="all")
        assert [t["trace_id"] for t in listed] == every
    listed = walk(api, "/v1/traces", 3, environment="all")
    assert {t["trace_id"]: t["records"] for t in listed}[LONG] == 13
    assert {t["trace_id"]: t["name"] for t in listed}[moved] == starts[moved][1]

    staging = {_trace_id(i) for i in range(0, 12, 4)}
    assert [
        t["trace_id"] for t in walk(api, "/v1/traces", 2, environment="staging")
    ] == _newest_first(starts, lambda t, at, name: t in staging)
    assert [t["trace_id"] for t in walk(api, "/v1/traces", 2, name="chat")] == _newest_first(
        starts, lambda t, at, name: name == "chat"
    )
    since, until = NOW - timedelta(minutes=50), NOW - timedelta(minutes=52 - 10)
    dates = {"start_date": since.isoformat(), "end_date": until.isoformat()}
    assert [
        t["trace_id"] for t in walk(api, "/v1/traces", 2, environment="all", **dates)
    ] == _newest_first(starts, lambda t, at, name: since <= at <= until)
