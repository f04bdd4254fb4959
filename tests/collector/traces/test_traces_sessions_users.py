"""Traces, sessions and users (issue 32 points 2-3, docs/api-notes.md, "Traces, sessions and
users"): the lists with their sums, filters and cursors; a trace and a session read whole, oldest
first, through paging; 404s; bad input as 400s; and a second project sees none of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.store import migrations
from tests.collector.traces.steps import log, read_whole, span, walk

NOW = datetime.now(UTC).replace(microsecond=0)
T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "4bf92f3577b34da6a3ce929d0e0e4736"
T3 = "5b8efff798038103d269b633813fc60c"


@pytest.fixture
def traces(api: TestClient) -> TestClient:
    """T1: a chain root, 3 model calls (one an error), a tool; user u1, session s1, an hour ago.
    T2: a root agent and one embedding, user u2, session s2, 2 hours ago.
    T3: a root made 3 days ago whose last call is today: it started 3 days ago."""
    one = {"user_id": "u1", "session_id": "s1"}
    base = NOW - timedelta(hours=1)
    t1 = [
        span(T1, 0, base, kind="chain", parent=None, latency_ms=9000, metadata=one),
        span(T1, 1, base + timedelta(seconds=1), metadata=one),
        span(T1, 2, base + timedelta(seconds=2), status="error", error="boom", metadata=one),
        span(T1, 3, base + timedelta(seconds=3), kind="tool", latency_ms=500, metadata=one),
        span(T1, 4, base + timedelta(seconds=4), latency_ms=1000, metadata=one),
    ]
    two = {"user_id": "u2", "session_id": "s2"}
    t2 = [
        span(T2, 0, NOW - timedelta(hours=2), kind="agent", parent=None, metadata=two),
        span(T2, 1, NOW - timedelta(hours=2), kind="embedding", metadata=two),
    ]
    t3 = [
        span(T3, 0, NOW - timedelta(days=3), kind="chain", parent=None),
        span(T3, 1, NOW - timedelta(minutes=5)),
    ]
    log(api, t1 + t2 + t3)
    return api


def test_the_trace_list_sums_each_trace_newest_first(traces: TestClient) -> None:
    listed = traces.get("/v1/traces").json()["data"]

    assert [t["trace_id"] for t in listed] == [T1, T2, T3]
    assert listed[0] == {
        "trace_id": T1,
        "name": "chain-0",
        "started_at": (NOW - timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        "duration_ms": 9000,
        "records": 5,
        "llm_calls": 3,
        "errors": 1,
        "total_tokens": 15,
        "estimated_cost_usd": 0.75,
        "user_id": "u1",
        "session_id": "s1",
        "scores": {},
    }
    assert (listed[1]["name"], listed[1]["records"], listed[1]["llm_calls"]) == ("agent-0", 2, 1)
    # T3 began 3 days ago: listed once, by its first record, though its last is the newest.
    assert listed[2]["started_at"].startswith((NOW - timedelta(days=3)).date().isoformat())
    assert listed[2]["duration_ms"] == 3 * 86_400_000 - 300_000
    assert listed[2]["user_id"] is None and listed[2]["session_id"] is None
    # One a page: the cursors walk the same list.
    assert [t["trace_id"] for t in walk(traces, "/v1/traces", 1)] == [T1, T2, T3]


def test_the_trace_list_filters_by_user_session_name_and_dates(traces: TestClient) -> None:
    def ids(**params: Any) -> list[str]:
        response = traces.get("/v1/traces", params=params)
        assert response.status_code == 200, response.text
        return [t["trace_id"] for t in response.json()["data"]]

    assert ids(user_id="u1") == [T1]
    assert ids(session_id="s2") == [T2]
    assert ids(name="chain-0") == [T1, T3]
    assert ids(name="llm-1") == []  # a child's name is not the trace's
    assert ids(start_date=(NOW - timedelta(days=1)).isoformat()) == [T1, T2]
    assert ids(end_date=(NOW - timedelta(days=2)).isoformat()) == [T3]
    assert ids(user_id="nobody") == []


def test_a_trace_of_500_records_reads_whole_oldest_first_through_pages(api: TestClient) -> None:
    at = NOW - timedelta(days=2)
    records = [span(T1, 0, at, kind="agent", parent=None)] + [
        span(T1, i, at + timedelta(milliseconds=i), kind=("llm", "tool", "retriever")[i % 3])
        for i in range(1, 500)
    ]
    log(api, records)

    trace, pages = read_whole(api, f"/v1/traces/{T1}", 100)

    assert pages == 5
    assert [r["id"] for r in trace["items"]] == [r["id"] for r in records]
    assert trace["records"] == 500 and trace["llm_calls"] == 166
    assert {r["kind"] for r in trace["items"]} == {"agent", "llm", "tool", "retriever"}
    # A deleted record leaves the trace, its sums and its pages.
    doomed = [span(T2, i, at, metadata={"doomed": "yes"}) for i in range(3)]
    log(api, doomed)
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 3
    assert api.get(f"/v1/traces/{T2}").status_code == 404


def test_a_trace_of_500_records_is_one_page_by_default(api: TestClient) -> None:
    """Issue 32: a trace of up to 500 records is read whole in one request."""
    at = NOW - timedelta(days=2)
    records = [span(T1, 0, at, kind="agent", parent=None)] + [
        span(T1, i, at + timedelta(milliseconds=i)) for i in range(1, 500)
    ]
    log(api, records)

    response = api.get(f"/v1/traces/{T1}")

    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["id"] for r in body["data"]["items"]] == [r["id"] for r in records]
    assert body["pagination"] == {"has_more": False}


def test_a_trace_of_1200_records_reads_in_two_pages_of_1000(api: TestClient) -> None:
    """The largest page is 1,000 records; a bigger trace pages on by cursor, exactly."""
    at = NOW - timedelta(days=2)
    records = [span(T1, 0, at, kind="chain", parent=None)] + [
        span(T1, i, at + timedelta(milliseconds=i // 2), kind=("llm", "tool")[i % 2])
        for i in range(1, 1200)
    ]  # two records a millisecond: the pages split ties by id, never repeating one
    log(api, records)

    trace, pages = read_whole(api, f"/v1/traces/{T1}", 1000)

    assert pages == 2
    ids = [r["id"] for r in trace["items"]]
    assert len(set(ids)) == 1200
    assert ids == [r["id"] for r in records]  # oldest first (ties by id) across the pages
    assert trace["records"] == 1200 and trace["llm_calls"] == 599
    for bad in (0, 1001, "x"):
        response = api.get(f"/v1/traces/{T1}", params={"limit": bad})
        assert response.status_code == 400, (bad, response.text)
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("VALIDATION_ERROR", "limit")


def test_unknown_and_malformed_trace_reads(api: TestClient) -> None:
    missing = api.get(f"/v1/traces/{T1}")
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "type": "not_found_error",
        "code": "TRACE_NOT_FOUND",
        "message": f"Trace '{T1}' not found",
        "details": {"trace_id": T1},
    }
    for path, params, field in (
        ("/v1/traces", {"cursor": "bogus"}, "cursor"),
        ("/v1/traces", {"limit": 0}, "limit"),
        ("/v1/traces", {"start_date": "yesterday"}, "start_date"),
        ("/v1/traces", {"start_date": "2026-05-03", "end_date": "2026-05-01"}, "start_date"),
        (f"/v1/traces/{T1}", {"cursor": "bogus"}, "cursor"),
        ("/v1/sessions", {"cursor": "x"}, "cursor"),
        ("/v1/sessions", {"end_date": "soon"}, "end_date"),
        ("/v1/users", {"limit": 101}, "limit"),
    ):
        response = api.get(path, params=params)
        assert response.status_code == 400, (path, params, response.text)
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("VALIDATION_ERROR", field)


def test_sessions_list_latest_activity_first_and_read_as_conversations(
    traces: TestClient,
) -> None:
    api = traces
    # s1 gets a later turn outside any trace, and an older turn beyond 30 days.
    log(
        api,
        [
            {
                "id": "req_turn-late",
                "created_at": (NOW - timedelta(minutes=1)).isoformat(),
                "model": "gpt-4o-mini",
                "metadata": {"user_id": "u3", "session_id": "s1"},
            },
            {
                "id": "req_turn-old",
                "created_at": (NOW - timedelta(days=40)).isoformat(),
                "model": "gpt-4o-mini",
                "metadata": {"user_id": "u1", "session_id": "s1"},
            },
        ],
    )
    api.post("/v1/scores", json={"request_id": "req_0af765-001", "name": "stars", "value": 4})
    api.post("/v1/scores", json={"trace_id": T1, "name": "stars", "value": 2})

    # A trace's scores are its own and its records', in the list and in the detail alike.
    assert api.get("/v1/traces").json()["data"][0]["scores"] == {"stars": 3.0}
    assert api.get(f"/v1/traces/{T1}").json()["data"]["scores"] == {"stars": 3.0}

    sessions = api.get("/v1/sessions").json()["data"]

    assert [s["session_id"] for s in sessions] == ["s1", "s2"]
    s1 = sessions[0]
    assert s1["user_ids"] == ["u1", "u3"]
    assert (s1["records"], s1["errors"], s1["total_tokens"]) == (4, 1, 15)  # model calls
    assert s1["first_at"] == (NOW - timedelta(hours=1, seconds=-1)).isoformat().replace(
        "+00:00", "Z"
    )
    assert s1["scores"] == {"stars": 3.0}
    assert [s["session_id"] for s in walk(api, "/v1/sessions", 1)] == ["s1", "s2"]
    assert [
        s["session_id"] for s in api.get("/v1/sessions", params={"user_id": "u3"}).json()["data"]
    ] == ["s1"]
    back = (NOW - timedelta(days=41)).isoformat()
    wide = api.get("/v1/sessions", params={"start_date": back}).json()["data"]
    assert wide[0]["records"] == 5

    # One session: every turn, oldest first, however old, each with its scores.
    whole, pages = read_whole(api, "/v1/sessions/s1", 2)
    assert pages == 3
    assert [r["id"] for r in whole["items"]] == [
        "req_turn-old",
        "req_0af765-001",
        "req_0af765-002",
        "req_0af765-004",
        "req_turn-late",
    ]
    assert whole["records"] == 5 and whole["user_ids"] == ["u1", "u3"]
    assert whole["items"][1]["scores"] == {"stars": 3.0}
    assert whole["items"][0]["scores"] == {}
    every, _ = read_whole(api, "/v1/sessions/s1", 100, kind="all")
    assert [r["kind"] for r in every["items"]][:3] == ["llm", "chain", "llm"]

    missing = api.get("/v1/sessions/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "SESSION_NOT_FOUND"


def test_users_list_their_totals_latest_activity_first(traces: TestClient) -> None:
    api = traces
    log(
        api,
        [
            {
                "id": f"req_u1-extra-{i}",
                "created_at": (NOW - timedelta(minutes=10 + i)).isoformat(),
                "model": "gpt-4o-mini",
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                "metadata": {"user_id": "u1", "session_id": f"s1-{i}"},
            }
            for i in range(2)
        ],
    )

    users = api.get("/v1/users").json()["data"]

    assert [u["user_id"] for u in users] == ["u1", "u2"]
    u1 = users[0]
    assert (u1["records"], u1["sessions"], u1["errors"], u1["total_tokens"]) == (5, 3, 1, 19)
    assert u1["last_at"] == (NOW - timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    assert [u["user_id"] for u in walk(api, "/v1/users", 1)] == ["u1", "u2"]
    assert [u["records"] for u in api.get("/v1/users", params={"kind": "all"}).json()["data"]] == [
        7,
        2,
    ]


def test_another_project_sees_none_of_these(traces: TestClient) -> None:
    key = traces.app.state.services.keys.create("other")
    other = TestClient(traces.app, headers={"X-API-Key": key})

    for path in ("/v1/traces", "/v1/sessions", "/v1/users"):
        body = other.get(path).json()
        assert body["data"] == [] and body["pagination"]["has_more"] is False, path
    assert other.get(f"/v1/traces/{T1}").json()["error"]["code"] == "TRACE_NOT_FOUND"
    assert other.get("/v1/sessions/s1").json()["error"]["code"] == "SESSION_NOT_FOUND"


def test_session_and_user_lists_stay_exact_after_retries_late_records_and_deletes(
    api: TestClient,
) -> None:
    """The lists take their order from a rollup of each session's and user's latest time
    (migration 20): retried copies, records arriving late and deletes (which the rollup only
    counts) must leave every page, at every depth, as a sum over the live records."""

    def turn(session: int, j: int, at: datetime, **meta: str) -> dict[str, Any]:
        return {
            "id": f"req_s{session}-{j}",
            "created_at": at.isoformat(),
            "model": "gpt-4o-mini",
            "usage": {"prompt_tokens": 2, "completion_tokens": 1},
            "metadata": {"user_id": f"u{session % 3}", "session_id": f"s{session}", **meta},
        }

    # Session i's turns at (100 - 10 i) minutes ago and the two minutes after: s7 the latest.
    records = [
        turn(i, j, NOW - timedelta(minutes=100 - 10 * i - j), **({"last": "yes"} if j == 2 else {}))
        for i in range(8)
        for j in range(3)
    ]
    log(api, records)
    log(api, records[:6])  # retried ids: s0 and s1 sent twice
    late = [
        turn(1, 9, NOW - timedelta(seconds=30)),  # s1's late turn is the newest of all
        turn(0, 9, NOW - timedelta(days=2)),  # s0's arrives late, older than any
    ]
    log(api, late)
    # s7 goes whole; s2..s6 lose their latest turn (which held the rollup's latest time).
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"session_id": "s7"}})
    assert gone.json()["data"]["deleted_count"] == 3
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"last": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 7

    live = [
        r
        for r in records + late
        if r["metadata"]["session_id"] != "s7"
        and r["metadata"].get("last") is None
        and r["created_at"] >= (NOW - timedelta(days=30)).isoformat()
    ]

    def latest_first(key: str) -> list[tuple[str, str, int, int]]:
        groups: dict[str, list[dict[str, Any]]] = {}
        for record in live:
            groups.setdefault(record["metadata"][key], []).append(record)
        rows = [
            (
                max(r["created_at"] for r in group).replace("+00:00", "Z"),
                value,
                len(group),
                3 * len(group),
            )
            for value, group in groups.items()
        ]
        return sorted(rows, reverse=True)

    def seen(items: list[dict[str, Any]], key: str) -> list[tuple[str, str, int, int]]:
        return [(i["last_at"], i[key], i["records"], i["total_tokens"]) for i in items]

    expected_sessions = latest_first("session_id")
    assert [s[1] for s in expected_sessions][:3] == ["s1", "s6", "s5"]
    assert seen(api.get("/v1/sessions").json()["data"], "session_id") == expected_sessions
    for limit in (1, 2, 3):
        assert seen(walk(api, "/v1/sessions", limit), "session_id") == expected_sessions
    expected_users = latest_first("user_id")
    assert seen(walk(api, "/v1/users", 1), "user_id") == expected_users
    assert seen(walk(api, "/v1/users", 2), "user_id") == expected_users
    # The session list by user: only the sessions where the user has a live record.
    by_user = [s for s in expected_sessions if int(s[1][1:]) % 3 == 1]
    assert seen(walk(api, "/v1/sessions", 1, user_id="u1"), "session_id") == by_user
    # A period that ends before a session's latest turns clips it to its turns inside.
    end = (NOW - timedelta(minutes=39, seconds=30)).isoformat()
    clipped = api.get("/v1/sessions", params={"end_date": end, "limit": 2}).json()["data"]
    assert [(s["session_id"], s["records"]) for s in clipped] == [("s6", 1), ("s5", 2)]


def test_the_lists_come_from_the_rollup_which_migration_20_fills_for_stored_records(
    traces: TestClient,
) -> None:
    """Emptied, the rollup lists nothing (the lists read it); its backfill fills it again from
    the log for records stored before it existed, and the lists are whole again."""
    store = traces.app.state.services.store
    client, database = store.client, str(store.database)
    before = (traces.get("/v1/sessions").json()["data"], traces.get("/v1/users").json()["data"])
    assert [s["session_id"] for s in before[0]] == ["s1", "s2"]

    client.command(f"TRUNCATE TABLE `{database}`.activity_rollup")
    assert traces.get("/v1/sessions").json()["data"] == []
    assert traces.get("/v1/users").json()["data"] == []

    (migration,) = [m for m in migrations.MIGRATIONS if m.version == 20]
    (fill,) = [
        s
        for s in migrations.migration_statements(migration, database, None)
        if s.startswith("INSERT")
    ]
    client.command(fill)
    client.command(fill)  # run twice (two collectors starting at once): no harm
    after = (traces.get("/v1/sessions").json()["data"], traces.get("/v1/users").json()["data"])
    assert after == before


def test_the_trace_list_of_one_user_pages_newest_first_through_the_metadata_index(
    api: TestClient,
) -> None:
    """The list by user or session reads the user's records from the metadata index: every
    page in start order, a trace begun days before the user's latest record placed by its
    start, retried records counted once, a deleted trace gone, another user's trace absent."""
    ux = {"user_id": "ux", "session_id": "sx"}
    traces = [f"{n:032x}" for n in range(1, 7)]
    records = [
        record
        for n, trace in enumerate(traces)
        for meta in [{**ux, "drop": "yes"} if n == 2 else ux]
        for record in (
            span(trace, 0, NOW - timedelta(hours=10 - n), kind="chain", parent=None, metadata=meta),
            span(trace, 1, NOW - timedelta(hours=10 - n, seconds=-5), metadata=meta),
        )
    ]
    # The first trace began 3 days ago; its last call is the newest record of all.
    long_trace = "f" * 32
    records += [
        span(long_trace, 0, NOW - timedelta(days=3), kind="agent", parent=None, metadata=ux),
        span(long_trace, 1, NOW - timedelta(minutes=1), metadata=ux),
        span(
            "e" * 32,
            0,
            NOW - timedelta(hours=1),
            kind="chain",
            parent=None,
            metadata={"user_id": "uy", "session_id": "sy"},
        ),
    ]
    log(api, records)
    log(api, records[:4])  # retried
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"drop": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 2

    newest_first = [traces[5], traces[4], traces[3], traces[1], traces[0], long_trace]
    for limit in (1, 2, 5):
        for key, value in (("user_id", "ux"), ("session_id", "sx")):
            listed = walk(api, "/v1/traces", limit, **{key: value})
            assert [t["trace_id"] for t in listed] == newest_first, (limit, key)
            assert [t["records"] for t in listed] == [2] * 6
    since = (NOW - timedelta(days=1)).isoformat()
    assert [
        t["trace_id"] for t in walk(api, "/v1/traces", 2, user_id="ux", start_date=since)
    ] == newest_first[:-1]
