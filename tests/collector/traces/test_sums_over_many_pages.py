"""The reads of issue 32's last speed pass (docs/benchmarks.md, "The last reads over their
targets"): a trace's first page that holds the whole trace is its summary too, a session's
one read is its summary and its page, the session list reads its sums and its records' ids
at once, and the session and user lists read the rollup a window of days at a time. These
tests hold each answer to what the slower reads gave: the same summary however a trace or a
session is paged, a session bigger than one read, lists over many days paged at every depth
after deletes, and a user's sessions found by records older than the session's latest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.traces.steps import log, read_whole, span, walk

NOW = datetime.now(UTC).replace(microsecond=0)
TRACE = "3c" * 16


def _call(record_id: str, at: datetime, session: str, user: str, **meta: str) -> dict[str, Any]:
    """A model call of 3 tokens in ``session`` by ``user``."""
    return {
        "id": record_id,
        "created_at": at.isoformat(),
        "model": "gpt-4o-mini",
        "usage": {"prompt_tokens": 2, "completion_tokens": 1},
        "metadata": {"user_id": user, "session_id": session, **meta},
    }


def _summary(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "items"}


def test_a_trace_sums_alike_from_its_whole_first_page_and_from_its_records_table(
    api: TestClient,
) -> None:
    """A trace of 40 records: its root has no user (a child's is the trace's), a child made
    before the root, one whose latency ends the trace, retried copies, a deleted record and an
    error. Its summary read with a page of the whole trace (summed from the page's rows) is
    the one read apart (a page of 1 or 7: ``trace_records``) and the trace list's."""
    at = NOW - timedelta(hours=5)
    mine = {"group": "t"}
    meta = {**mine, "user_id": "u-trace", "session_id": "s-trace"}
    records = [span(TRACE, 0, at, kind="chain", parent=None, latency_ms=1000, metadata=mine)]
    records += [
        span(
            TRACE,
            i,
            at + timedelta(seconds=i),
            kind=("llm", "tool", "embedding", "retriever")[i % 4],
            latency_ms=50,
            metadata=meta if i >= 3 else mine,
            **({"status": "error", "error": "boom"} if i == 9 else {}),
        )
        for i in range(1, 39)
    ]
    records.append(
        span(TRACE, 39, at - timedelta(minutes=2), kind="tool", latency_ms=5, metadata=mine)
    )
    records[20]["latency_ms"] = 3_600_000  # ends an hour after it began: the trace's end
    records[30]["metadata"] = {**meta, "doomed": "yes"}
    log(api, records)
    log(api, records[:15])  # retried
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 1

    whole, pages = read_whole(api, f"/v1/traces/{TRACE}", 1000)
    assert pages == 1
    live = [r for i, r in enumerate(records) if i != 30]
    assert [r["id"] for r in whole["items"]] == [
        r["id"] for r in sorted(live, key=lambda r: r["created_at"])
    ]
    expected = {
        "trace_id": TRACE,
        "name": "chain-0",
        "started_at": (at - timedelta(minutes=2)).isoformat().replace("+00:00", "Z"),
        "duration_ms": 120_000 + 20_000 + 3_600_000,
        "records": 39,
        "llm_calls": sum(1 for r in live if r["kind"] in ("llm", "embedding")),
        "errors": 1,
        "total_tokens": 5 * sum(1 for r in live if r["kind"] in ("llm", "embedding")),
        "estimated_cost_usd": 0.25 * sum(1 for r in live if r["kind"] in ("llm", "embedding")),
        "user_id": "u-trace",
        "session_id": "s-trace",
        "scores": {},
        "evaluations": [],  # no evaluation rule judges this project
    }
    assert _summary(whole) == expected
    for limit in (1, 7, 40):
        paged, _ = read_whole(api, f"/v1/traces/{TRACE}", limit)
        assert _summary(paged) == expected, limit
        assert paged["items"] == whole["items"], limit
    (listed,) = api.get("/v1/traces", params={"user_id": "u-trace"}).json()["data"]
    assert listed == {k: v for k, v in expected.items() if k != "evaluations"}  # detail only
    # Every record deleted: no page and no summary, whatever the page size.
    gone = api.request("DELETE", "/v1/requests", json={"metadata": mine})
    assert gone.json()["data"]["deleted_count"] == len(live)
    for limit in (1, 1000):
        response = api.get(f"/v1/traces/{TRACE}", params={"limit": limit})
        assert response.json()["error"]["code"] == "TRACE_NOT_FOUND", response.text


def test_a_session_bigger_than_one_read_pages_and_sums_as_a_small_one(api: TestClient) -> None:
    """A session of 1,050 records (more rows than its one read takes at once, with copies)
    reads its summary and pages apart; a small one reads them at once. Both sum as the session
    list does, and both count the scores of their records of every kind."""
    big, small = "s-big", "s-small"

    def turn(session: str, i: int, at: datetime) -> dict[str, Any]:
        made: dict[str, Any] = {
            "id": f"req_{session}-{i:04d}",
            "created_at": at.isoformat(),
            "metadata": {"session_id": session, "user_id": f"u-{i % 3}"},
        }
        if (session, i) in ((big, 4), (small, 5)):
            made["metadata"]["drop"] = "yes"  # deleted below
        if i % 3 == 0:
            made.update(kind="tool", span_name="lookup")
        else:
            made.update(model="gpt-4o-mini", usage={"prompt_tokens": 2, "completion_tokens": 1})
        return made

    start = NOW - timedelta(hours=3)
    records = [turn(big, i, start + timedelta(seconds=i)) for i in range(1050)]
    records += [turn(small, i, start + timedelta(seconds=i, milliseconds=500)) for i in range(9)]
    log(api, records)
    log(api, records[:40])  # retried
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"drop": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 2
    tool = "req_s-small-0003"
    for target in (tool, "req_s-big-0999"):  # a tool run's score counts for its session
        scored = api.post("/v1/scores", json={"request_id": target, "name": "ok", "value": True})
        assert scored.status_code == 201, scored.text

    listed = {s["session_id"]: s for s in api.get("/v1/sessions").json()["data"]}
    assert set(listed) == {big, small}
    assert listed[small]["scores"] == {"ok": 1.0} and listed[big]["scores"] == {"ok": 1.0}
    for session, size, gone_id in ((big, 1050, 4), (small, 9, 5)):
        live = [r for r in records if r["metadata"]["session_id"] == session]
        live = [r for r in live if r["id"] != f"req_{session}-{gone_id:04d}"]
        calls = [r for r in live if "model" in r]
        for limit in (50 if session == big else 3, 100):
            whole, _ = read_whole(api, f"/v1/sessions/{session}", limit)
            assert [r["id"] for r in whole["items"]] == [r["id"] for r in calls], (session, limit)
            assert (whole["records"], whole["total_tokens"]) == (len(calls), 3 * len(calls))
            assert whole["user_ids"] == ["u-1", "u-2"] and whole["scores"] == {"ok": 1.0}
            # Summed in another order (here, and in ClickHouse for the list): the last bits.
            cost = whole.pop("estimated_cost_usd")
            assert cost == pytest.approx(listed[session]["estimated_cost_usd"], rel=1e-12)
            assert whole.pop("evaluations") == []  # the detail's only (none here)
            assert _summary(whole) == {
                k: v for k, v in listed[session].items() if k != "estimated_cost_usd"
            }
        every, _ = read_whole(api, f"/v1/sessions/{session}", 100, kind="all")
        assert [r["id"] for r in every["items"]] == [r["id"] for r in live], session
        assert every["records"] == len(live) == size - 1
        assert every["user_ids"] == ["u-0", "u-1", "u-2"]


def test_session_and_user_lists_over_many_days_stay_exact_at_every_depth(
    api: TestClient,
) -> None:
    """Twelve sessions, one every two days back to 22 days ago, each with a turn the day
    before its last; four users across them. Deletes take the latest turn of some (their
    latest is then a day older) and one session's latest turn is retried. Every page, at
    every size, is the sum over the live records, latest first: the lists read the rollup a
    window of days at a time, a window that holds too few going on below it."""

    def turn(session: int, j: int, at: datetime, **meta: str) -> dict[str, Any]:
        return _call(f"req_d{session}-{j}", at, f"d{session}", f"u{session % 4}", **meta)

    records = []
    for i in range(12):
        latest = NOW - timedelta(days=2 * i, minutes=5 + i)
        records += [
            turn(i, 0, latest - timedelta(days=1)),
            turn(i, 1, latest, **({"drop": "yes"} if i in (0, 4, 7) else {})),
        ]
    log(api, records)
    log(api, [records[5]])  # d2's latest, retried
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"drop": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 3
    live = [r for r in records if r["metadata"].get("drop") is None]

    def seen(items: list[dict[str, Any]], key: str) -> list[tuple[str, str, int]]:
        return [(i["last_at"], i[key], i["records"]) for i in items]

    sessions, users = _latest_first(live, "session_id"), _latest_first(live, "user_id")
    # d0's latest turn is gone: its latest is now a day old, still before d1's.
    assert [s[1:] for s in sessions[:3]] == [("d0", 1), ("d1", 2), ("d2", 2)]
    for limit in (1, 2, 5, 20):
        assert seen(walk(api, "/v1/sessions", limit), "session_id") == sessions, limit
        assert seen(walk(api, "/v1/users", limit), "user_id") == users, limit
    since = (NOW - timedelta(days=9)).isoformat()
    in_period = _latest_first(live, "session_id", since)
    assert seen(walk(api, "/v1/sessions", 2, start_date=since), "session_id") == in_period


def _latest_first(
    records: list[dict[str, Any]], key: str, since: str = ""
) -> list[tuple[str, str, int]]:
    """(latest time, value, records) of each ``key`` over the records at or after ``since``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["created_at"] >= since:
            groups.setdefault(record["metadata"][key], []).append(record)
    return sorted(
        (
            (max(r["created_at"] for r in group).replace("+00:00", "Z"), value, len(group))
            for value, group in groups.items()
        ),
        reverse=True,
    )


def test_a_user_s_sessions_include_one_whose_user_is_only_in_older_days(
    api: TestClient,
) -> None:
    """A session's latest turn is today by user a, its turn by user b ten days ago; another
    session of b is from two hours ago. The sessions of b are both, latest first: the list
    by user tests each session's users over the whole period, not a window of days."""

    log(
        api,
        [
            _call("req_a-1", NOW - timedelta(hours=1), "s-shared", "a"),
            _call("req_b-1", NOW - timedelta(days=10), "s-shared", "b"),
            _call("req_b-2", NOW - timedelta(hours=2), "s-b", "b"),
        ],
    )
    for limit in (1, 20):
        listed = walk(api, "/v1/sessions", limit, user_id="b")
        assert [(s["session_id"], s["user_ids"]) for s in listed] == [
            ("s-shared", ["a", "b"]),
            ("s-b", ["b"]),
        ], limit
