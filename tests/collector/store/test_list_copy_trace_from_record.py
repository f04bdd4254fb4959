"""The list copy's ``trace`` and ``cost_known`` written by its view (migration 51).

Before migration 51 ClickHouse computed both from the packed ``detail`` as each row of
``request_items`` was written; since, the view gives them from the record's own columns. A
store from before keeps its rows' values, and a record stored after reads exactly what the
same record stored before did: the list item's span fields and price flag, the trace index
(``trace_id``) and the thread items the list copy feeds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.migrations import MIGRATIONS, migrate
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.requests import RequestStore
from tests.collector.upgrades import insert_rows, store_before

START = datetime(2026, 5, 2, 9, tzinfo=UTC)

# Span fields as odd as a client may send: a slash (which the packed detail escapes), quotes,
# backslashes, control characters, non-ASCII text, and a record outside any trace.
SPANS: tuple[tuple[str, str, str, str], ...] = (
    ("", "", "", ""),
    ("a" * 32, "0000000000000001", "", "chat gpt-4o"),
    ("b" * 32, "0000000000000002", "0000000000000001", 'tool "search" / web'),
    ("c" * 32, "0000000000000003", "", "back\\slash \\/ and \t\n\x01 control"),
    ("d/e", "span/1", "parent/0", "ünïcødé 中文 😀 \u2028"),
    ("", "0000000000000009", "", "a span name without a trace"),
)


def _records(prefix: str, minutes: int) -> list[RequestRow]:
    return [
        RequestRow(
            id=f"req_{prefix}-{i}",
            created_at=START + timedelta(minutes=minutes + i),
            prompt_name="support",
            model="gpt-4o-mini",
            output={"content": f"answer {i}"},
            metadata={"session_id": f"s{i}", "user_id": f"u{i}"},
            estimated_cost_usd=0.25 * i,
            cost_known=i % 2 == 1,
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            span_name=name,
        )
        for i, (trace_id, span_id, parent, name) in enumerate(SPANS)
    ]


_ITEMS = (
    "SELECT id, trace, trace_id, cost_known FROM {db}.request_items "
    "WHERE id LIKE {like:String} ORDER BY id"
)
_THREADS = (
    "SELECT id, key, value, trace, cost_known, item FROM {db}.thread_items "
    "WHERE id LIKE {like:String} ORDER BY id, key"
)


def _numbered(client: Any, db: str, prefix: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of ``query`` for the records of ``prefix``, each id cut to its number."""
    rows = client.query(
        query.replace("{db}", db),
        parameters={"like": f"req_{prefix}-%"},
    ).result_rows
    return [(str(r[0]).rsplit("-", 1)[1], *r[1:]) for r in rows]


def test_a_store_from_before_51_keeps_its_values_and_new_rows_read_the_same(
    settings: Settings,
) -> None:
    db = f"`{settings.database}`"
    store_before(settings, 51, _records("old", 0))
    client = open_client(settings.store_url)
    try:
        items_before = _numbered(client, db, "old", _ITEMS)
        threads_before = _numbered(client, db, "old", _THREADS)
        # Migration 51 and every one after it.
        assert migrate(client, settings.database) == [
            m.version for m in MIGRATIONS if m.version >= 51
        ]
        kinds = dict(
            client.query(
                "SELECT name, default_kind FROM system.columns WHERE database = {db:String} "
                "AND table = 'request_items' AND name IN ('trace', 'cost_known')",
                parameters={"db": settings.database},
            ).result_rows
        )
        # The view writes them now; the expressions only fill a part that lacks them.
        assert kinds == {"trace": "DEFAULT", "cost_known": "DEFAULT"}
        # The rows stored before keep what they held.
        assert _numbered(client, db, "old", _ITEMS) == items_before
        assert _numbered(client, db, "old", _THREADS) == threads_before
    finally:
        client.close()

    # The same records stored now: the view's values are the ones ClickHouse computed before.
    insert_rows(settings, _records("new", 60))
    client = open_client(settings.store_url)
    try:
        assert _numbered(client, db, "new", _ITEMS) == items_before
        new_threads = _numbered(client, db, "new", _THREADS)
        # Thread items' packed list item holds the record's time: compare it apart.
        assert [r[:5] for r in new_threads] == [r[:5] for r in threads_before]
        # A traced record's list item reads its span fields back as they were sent, and the
        # list by trace finds it through the copy's trace index.
        store = RequestStore(client, settings.database)
        for trace_id, span_id, parent, name in SPANS:
            if not trace_id:
                continue
            page = store.page("default", RequestFilter(trace_id=trace_id), None, 10)
            found = [r for r in page if r.id.startswith("req_new-")]
            assert [(r.trace_id, r.span_id, r.parent_span_id, r.span_name) for r in found] == [
                (trace_id, span_id, parent, name)
            ]
        assert [r[3] for r in _numbered(client, db, "new", _ITEMS)] == [
            i % 2 == 1 for i in range(len(SPANS))
        ]
    finally:
        client.close()
