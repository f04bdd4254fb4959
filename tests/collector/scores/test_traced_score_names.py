"""What the process knows of the score names scored on traces (store/traced_score_names.py).

The list's score filters and the score analytics leave the trace half out for a name with no
trace score; asking the store costs a key read per name and page, so the answer is kept. A
kept "no" must never hide a trace score: these tests hold the rules that make it safe.

A process that does not know a name asks the store (score_sql.read_traced_names): a sum on a
trace, a name stored in ``score_span_names`` (migration 48) by the write of a score on a span
record, or a score whose record is not stored yet. Three key reads, whatever the size of the
log: the store's answer once looked every span record's id up (~3M at 10M records).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.score_sql import read_traced_names, traced_names
from promptrail.collector.store.traced_score_names import TracedScoreNames
from tests.collector.scores.steps import (
    counted_queries,
    created,
    database_of,
    fresh,
    log,
    log_trace,
    observed_call,
    store_client,
)
from tests.collector.upgrades import store_before


class FakeStore:
    """The store's side of the cache: which names have trace scores, and the reads made."""

    def __init__(self) -> None:
        self.traced: dict[str, set[str]] = {}
        self.reads: list[tuple[str, tuple[str, ...]]] = []

    def read(self, project: str, names: Sequence[str]) -> Iterable[str]:
        self.reads.append((project, tuple(names)))
        return [n for n in names if n in self.traced.get(project, set())]


def test_the_sole_writer_keeps_a_no_and_learns_a_yes_from_its_own_write() -> None:
    store = FakeStore()
    names = TracedScoreNames(store.read, sole_writer=True)
    assert names.of("p", ["helpful"]) == frozenset()
    assert names.of("p", ["helpful"]) == frozenset()
    assert store.reads == [("p", ("helpful",))]  # asked once

    names.note("p", ["helpful"])  # before the trace score's insert
    store.traced["p"] = {"helpful"}
    assert names.of("p", ["helpful", "thumbs"]) == {"helpful"}
    assert store.reads[1:] == [("p", ("thumbs",))]  # only the name it had not asked about
    assert names.of("q", ["helpful"]) == frozenset()  # projects apart


def test_another_writer_s_trace_score_is_seen_where_the_process_is_not_the_only_writer() -> None:
    store = FakeStore()
    names = TracedScoreNames(store.read, sole_writer=False)
    assert names.of("p", ["helpful"]) == frozenset()
    store.traced["p"] = {"helpful"}  # another collector's write: no note here
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert len(store.reads) == 2  # a yes is kept, a no asked again


def test_a_trace_score_written_while_the_store_is_read_is_not_hidden_by_that_read() -> None:
    store = FakeStore()
    reading, noted = threading.Event(), threading.Event()

    def slow_read(project: str, names: Sequence[str]) -> Iterable[str]:
        answer = store.read(project, names)  # the store has no trace score yet
        reading.set()
        noted.wait(5)
        return answer

    names = TracedScoreNames(slow_read, sole_writer=True)
    seen: list[frozenset[str]] = []
    reader = threading.Thread(target=lambda: seen.append(names.of("p", ["helpful"])))
    reader.start()
    assert reading.wait(5)
    names.note("p", ["helpful"])  # a writer, while the read is under way
    noted.set()
    reader.join(5)
    assert seen == [{"helpful"}]
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert len(store.reads) == 1


def asked(api: TestClient, *names: str) -> list[str]:
    """Which of ``names`` the store says count for a trace, as a fresh process asks."""
    table = api.app.state.services.store.scores.table
    return read_traced_names(store_client(api), table, "default", names)


def pending_of(api: TestClient, name: str) -> int:
    """How many scores of ``name`` the store sums under PENDING (record not stored yet)."""
    (count,) = (
        store_client(api)
        .query(
            f"SELECT sum(scores) FROM `{database_of(api)}`.score_sums_by_time "
            "WHERE project = 'default' AND name = {n:String} AND on_trace = 0 "
            "AND record_at = toDateTime64(0, 3, 'UTC')",
            parameters={"n": name},
        )
        .result_rows[0]
    )
    return int(count)


def test_a_fresh_process_learns_from_the_store_which_names_are_scored_on_span_records(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    on_span, on_call, on_trace = fresh("span"), fresh("call"), fresh("trace")
    trace, span, call = observed_call(scores_api, tag)
    created(scores_api, request_id=span, name=on_span, value=0.2)
    created(scores_api, request_id=call, name=on_call, value=0.7)
    created(scores_api, request_id=log(scores_api, tag, 1), name=on_call, value=0.4)
    created(scores_api, trace_id=trace, name=on_trace, value=True)
    assert asked(scores_api, on_span, on_call, on_trace) == sorted([on_span, on_trace])


def test_an_early_score_on_a_span_is_known_before_and_after_it_moves_to_its_record(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    name = fresh("early")
    trace, span, _ = observed_call(scores_api, tag, log=False)
    created(scores_api, request_id=span, name=name, value=0.1)  # before its record
    assert asked(scores_api, name) == [name]  # it may be a span's: the PENDING run says so
    log_trace(scores_api, tag, trace)
    assert asked(scores_api, name) == [name]
    # The name's next write moves the early score onto its record, out of the PENDING run.
    created(scores_api, request_id=log(scores_api, tag, 2), name=name, value=0.9)
    assert pending_of(scores_api, name) == 0
    assert asked(scores_api, name) == [name]


@pytest.mark.cost
def test_the_store_s_answer_reads_no_record_of_the_log() -> None:
    sql = traced_names("`db`.`scores`", ["a", "b"])
    assert "trace_records" not in sql and "request_items" not in sql, sql
    assert sql.count("LIMIT 1") == 6, sql  # three key ranges a name, each to its first row


def test_migration_48_finds_the_names_scored_on_span_records_before_it(settings: Settings) -> None:
    at = datetime(2026, 5, 4, 10, tzinfo=UTC)
    trace = uuid.uuid4().hex
    rows = [
        RequestRow(id="req_up-span", created_at=at, kind="span", trace_id=trace, span_id="1"),
        RequestRow(id="req_up-call", created_at=at, kind="llm", trace_id=trace, span_id="2"),
        RequestRow(id="req_up-plain", created_at=at, kind="span"),  # in no trace
    ]
    store_before(settings, 48, rows)
    client = open_client(settings.store_url)
    columns = "project, id, request_id, name, data_type, value, value_number, value_text, "
    columns += "source, metadata, created_at, record_at, written_at, is_deleted"
    scored = [("s1", "req_up-span", "q"), ("s2", "req_up-call", "k"), ("s3", "req_up-plain", "k")]
    values = ",".join(
        f"('default','{i}','{rid}','{name}','numeric','0.5',0.5,'0.5','api','{{}}',now64(3),"
        "'2026-05-04 10:00:00','2026-05-04 10:00:01',0)"
        for i, rid, name in scored
    )
    try:
        client.command(f"INSERT INTO `{settings.database}`.scores ({columns}) VALUES {values}")
        assert 48 in migrations.migrate(client, settings.database)
        table = f"`{settings.database}`.`scores`"
        assert read_traced_names(client, table, "default", ["q", "k"]) == ["q"]
    finally:
        client.close()


@pytest.mark.cost
def test_a_project_without_traces_writes_scores_without_reading_its_records_kinds(
    scores_api: TestClient,
) -> None:
    """Only a record in a trace can be a span record: in a project with none, a score's
    write does not look its record's kind up (~35 ms of a 1,000-score batch)."""
    project = f"p{uuid.uuid4().hex[:10]}"
    key: str = scores_api.app.state.services.keys.create(project)
    api = TestClient(scores_api.app, headers={"X-API-Key": key})
    tag, name = uuid.uuid4().hex[:8], fresh("plain")
    record = log(api, tag, 1)
    with counted_queries(api) as seen:
        created(api, request_id=record, name=name, value=0.5)
    kinds = [sql for sql in seen if "request_items" in sql and "(created_at, id) IN" in sql]
    assert kinds == [], kinds
    # Once the project has a trace, a score on its span record is found for the trace.
    _, span, _ = observed_call(api, tag)
    created(api, request_id=span, name=name, value=0.1)
    table = api.app.state.services.store.scores.table
    assert read_traced_names(store_client(api), table, project, [name]) == [name]
