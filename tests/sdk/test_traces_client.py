"""``client.traces``, ``client.sessions`` and ``client.users`` on a live collector
(docs/api-notes.md, "Traces, sessions and users"),
through :class:`promptrail.Client` and :class:`promptrail.AsyncClient`: lists through their
cursors, a trace and a session read whole across pages, unknown ids as NotFoundError."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import promptrail
from tests.sdk.conftest import RequestLog

pytestmark = pytest.mark.anyio

START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


def _trace(trace_id: str, records: int, user: str, session: str) -> list[dict[str, Any]]:
    """A root chain span and ``records - 1`` model calls under it, a second apart."""
    meta = {"user_id": user, "session_id": session}
    root: dict[str, Any] = {
        "id": f"req_{trace_id[:8]}-root",
        "created_at": START.isoformat(),
        "trace_id": trace_id,
        "span_id": "0" * 16,
        "span_name": "answer",
        "kind": "chain",
        "latency_ms": records * 1000,
        "metadata": meta,
    }
    calls = [
        {
            "id": f"req_{trace_id[:8]}-{i:03d}",
            "created_at": (START + timedelta(seconds=i)).isoformat(),
            "trace_id": trace_id,
            "span_id": f"{i:016x}",
            "parent_span_id": "0" * 16,
            "model": "gpt-4o-mini",
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "estimated_cost_usd": 0.5},
            "metadata": meta,
        }
        for i in range(1, records)
    ]
    return [root, *calls]


def test_a_trace_of_250_records_is_read_whole_and_listed_with_its_sums(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    trace_id = uuid.uuid4().hex
    user, session = f"u-{trace_id[:6]}", f"s-{trace_id[:6]}"
    records = _trace(trace_id, 250, user, session)
    for at in range(0, 250, 100):
        assert client.requests.log_batch(records[at : at + 100]).accepted == len(
            records[at : at + 100]
        )
    sent = requests_seen.count(f"GET /v1/traces/{trace_id}")

    trace = client.traces.get(trace_id)

    # One request: a trace's pages hold up to 1,000 records (issue 32).
    assert requests_seen.count(f"GET /v1/traces/{trace_id}") - sent == 1
    assert isinstance(trace, promptrail.Trace)
    assert [r.id for r in trace.items] == [r["id"] for r in records]  # oldest first, whole
    assert trace.items[0].kind == "chain" and {r.kind for r in trace.items[1:]} == {"llm"}
    assert (trace.name, trace.records, trace.llm_calls, trace.errors) == ("answer", 250, 249, 0)
    assert (trace.total_tokens, trace.user_id, trace.session_id) == (249 * 5, user, session)
    assert trace.estimated_cost_usd == pytest.approx(249 * 0.5)
    assert trace.duration_ms == 250_000  # the root's own latency is the longest
    (listed,) = list(client.traces.list(user_id=user))
    assert listed.trace_id == trace_id and listed.items == []
    assert listed.records == 250
    # The request log shows the model calls, the trace's own list every kind.
    assert len(list(client.requests.list(trace_id=trace_id, limit=100))) == 250
    assert len(list(client.requests.list(metadata={"user_id": user}, limit=100))) == 249
    assert len(list(client.requests.list(metadata={"user_id": user}, kind="chain"))) == 1
    # A session's pages stay at most 100 records: its 249 model calls take 3 requests.
    sent = requests_seen.count(f"GET /v1/sessions/{session}")
    assert len(client.sessions.get(session).items) == 249
    assert requests_seen.count(f"GET /v1/sessions/{session}") - sent == 3


def test_a_trace_past_1000_records_is_read_whole_in_pages_of_1000(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    trace_id = uuid.uuid4().hex
    records = _trace(trace_id, 1001, f"u-{trace_id[:6]}", f"s-{trace_id[:6]}")
    for at in range(0, 1001, 500):
        client.requests.log_batch(records[at : at + 500])

    trace = client.traces.get(trace_id)

    assert requests_seen.count(f"GET /v1/traces/{trace_id}") == 2  # 1,000 + 1
    assert [r.id for r in trace.items] == [r["id"] for r in records]
    assert trace.records == 1001


def test_sessions_and_users_list_and_a_session_reads_as_a_conversation(
    client: promptrail.Client,
) -> None:
    tag = uuid.uuid4().hex[:8]
    user = f"u-{tag}"
    for n in range(3):
        client.requests.log_batch(_trace(uuid.uuid4().hex, 2 + n, user, f"s-{tag}-{n}"))

    sessions = list(client.sessions.list(user_id=user, limit=2))  # two pages
    whole = client.sessions.get(f"s-{tag}-2")
    (me,) = [u for u in client.users.list() if u.user_id == user]

    assert [s.session_id for s in sessions] == [f"s-{tag}-{n}" for n in (2, 1, 0)] or sorted(
        s.session_id for s in sessions
    ) == [f"s-{tag}-{n}" for n in range(3)]
    assert [s.records for s in sorted(sessions, key=lambda s: s.session_id)] == [1, 2, 3]
    assert all(s.user_ids == [user] for s in sessions)
    assert isinstance(whole, promptrail.Session)
    assert [r.kind for r in whole.items] == ["llm"] * 3  # the model calls, oldest first
    assert [r.created_at for r in whole.items] == sorted(r.created_at for r in whole.items)
    assert len(client.sessions.get(f"s-{tag}-2", kind="all").items) == 4
    assert isinstance(me, promptrail.User)
    assert (me.records, me.sessions, me.total_tokens) == (6, 3, 30)
    with pytest.raises(promptrail.NotFoundError) as missing:
        client.sessions.get(f"s-{tag}-none")
    assert missing.value.code == "SESSION_NOT_FOUND"


async def test_the_async_client_reads_the_same(aclient: promptrail.AsyncClient) -> None:
    trace_id = uuid.uuid4().hex
    user, session = f"u-{trace_id[:6]}", f"s-{trace_id[:6]}"
    await aclient.requests.log_batch(_trace(trace_id, 120, user, session))

    trace = await aclient.traces.get(trace_id)
    listed = [t async for t in aclient.traces.list(session_id=session)]
    conversation = await aclient.sessions.get(session)
    users = [u async for u in aclient.users.list() if u.user_id == user]

    assert len(trace.items) == 120 and trace.records == 120
    assert [t.trace_id for t in listed] == [trace_id]
    assert len(conversation.items) == 119 and conversation.records == 119
    assert [u.records for u in users] == [119]
    with pytest.raises(promptrail.NotFoundError) as missing:
        await aclient.traces.get(uuid.uuid4().hex)
    assert missing.value.code == "TRACE_NOT_FOUND"
