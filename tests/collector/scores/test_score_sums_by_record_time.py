"""The score sums keyed by the scored record's time (migration 42) stay exact, and the list's
score filters read them: a score written before its record, moved once the record lands,
deleted before or after; a record's delete; an upgraded store.

A list page's pass reads the sums of its window of records as one run of
``score_sums_by_time`` per name, plus the pending run (scores whose record was not stored
when they were written), whatever the record ids look like (collector/store/DESIGN.md,
"Scores"). Each key's sums must equal what the live scores say, and no tombstone may land
under another key than the version it ends: a -1 under one key and its +1 under another
would leave a negative sum there, which these tests look for.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store import scores as scores_module
from promptrail.collector.store.connection import open_client
from tests.collector.scores.steps import (
    created,
    database_of,
    log,
    reference_sums,
    store_client,
)
from tests.collector.upgrades import store_before, wide_rows
from tests.keys import DEFAULT_AUTH

PENDING = datetime(1970, 1, 1, tzinfo=UTC)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def sums_by_time(client: Any, database: str, names: list[str]) -> dict[tuple[Any, ...], Any]:
    """What ``score_sums_by_time`` says per (name, on_trace, record_at, target, value)."""
    rows = client.query(
        "SELECT name, on_trace, record_at, target, value_text, sum(total), sum(numbers), "
        f"sum(scores) FROM `{database}`.score_sums_by_time WHERE project = 'default' "
        "AND name IN {n:Array(String)} GROUP BY name, on_trace, record_at, target, value_text",
        parameters={"n": names},
    ).result_rows
    return {
        (r[0], int(r[1]), _utc(r[2]), r[3], r[4]): (round(float(r[5]), 9), int(r[6]), int(r[7]))
        for r in rows
        if (int(r[6]), int(r[7])) != (0, 0) or abs(float(r[5])) > 1e-9
    }


def record_times(client: Any, database: str) -> dict[str, datetime]:
    rows = client.query(
        f"SELECT id, min(created_at) FROM `{database}`.request_ids WHERE project = 'default' "
        "GROUP BY id"
    ).result_rows
    return {str(r[0]): _utc(r[1]) for r in rows}


def assert_exact(client: Any, database: str, names: list[str]) -> dict[tuple[Any, ...], Any]:
    """Every key of the sums by time is a live score's, under PENDING or its record's time
    (a trace's or a session's under PENDING), and they add up to the live scores."""
    by_time = sums_by_time(client, database, names)
    times = record_times(client, database)
    added: dict[tuple[str, int, str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0])
    for (name, on_trace, at, target, text), (total, numbers, scores) in by_time.items():
        assert scores > 0 and numbers >= 0, (name, at, target, text, scores)
        assert at == PENDING or (on_trace == 0 and at == times.get(target)), (target, at)
        entry = added[(name, on_trace, target, text)]
        entry[0] += total
        entry[1] += numbers
        entry[2] += scores
    assert {k: (round(v[0], 9), int(v[1]), int(v[2])) for k, v in added.items()} == reference_sums(
        client, database, names
    )
    return by_time


def listed_on(api: TestClient, day: str, **params: Any) -> list[str]:
    """The ids of the list of ``day``'s records (the log's windowed scan, no metadata index)."""
    dates = {"start_date": day, "end_date": day, "limit": 100}
    response = api.get("/v1/requests", params={**dates, **params})
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]]


def logged(api: TestClient, tag: str, n: int, day: str, trace: str | None = None) -> str:
    return log(api, tag, n, trace, created_at=f"{day}T10:00:{n:02d}Z")


def test_a_score_written_before_its_record_is_found_once_the_record_lands(
    scores_api: TestClient,
) -> None:
    day, tag = "2026-04-02", uuid.uuid4().hex[:8]
    name, kind = f"early_{tag}", f"kind_{tag}"
    early = f"req_{tag}_1"
    created(scores_api, request_id=early, name=name, value=0.9)
    created(scores_api, request_id=early, name=kind, value="good")
    client, database = store_client(scores_api), database_of(scores_api)
    by_time = assert_exact(client, database, [name, kind])
    assert {k[2] for k in by_time} == {PENDING}
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == []

    assert logged(scores_api, tag, 1, day) == early
    other = logged(scores_api, tag, 2, day)
    # Found while its sums are still pending: the pass reads the pending run beside its window.
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [early]
    assert listed_on(scores_api, day, **{f"score.{kind}": "good"}) == [early]
    assert listed_on(scores_api, day, unscored=name) == [other]

    # The next score write of the name moves them to the record's time.
    created(scores_api, request_id=other, name=name, value=0.1)
    by_time = assert_exact(client, database, [name, kind])
    at = record_times(client, database)[early]
    assert (name, 0, at, early, "0.9") in by_time and (kind, 0, PENDING, early, "good") in by_time
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [early]
    assert listed_on(scores_api, day, **{f"score.{name}.max": 0.5}) == [other]
    assert listed_on(scores_api, day, **{f"score.{kind}": "good"}) == [early]
    created(scores_api, request_id=other, name=kind, value="bad")
    by_time = assert_exact(client, database, [name, kind])
    assert (kind, 0, at, early, "good") in by_time
    assert listed_on(scores_api, day, **{f"score.{kind}": "good"}) == [early]


def test_deleting_or_replacing_an_early_score_before_and_after_it_moved(
    scores_api: TestClient,
) -> None:
    day, tag = "2026-04-03", uuid.uuid4().hex[:8]
    name = f"gone_{tag}"
    first, second = f"req_{tag}_1", f"req_{tag}_2"
    a = created(scores_api, request_id=first, name=name, value=0.9)
    b = created(scores_api, request_id=second, name=name, value=0.8)
    logged(scores_api, tag, 1, day)
    logged(scores_api, tag, 2, day)
    client, database = store_client(scores_api), database_of(scores_api)

    # Deleted before any write moved it: its tombstone lands under PENDING, as its +1 did.
    assert scores_api.delete(f"/v1/scores/{a['id']}").status_code == 200
    assert_exact(client, database, [name])
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [second]

    # Replaced before it moved: the new version is summed under the record's time at once.
    created(scores_api, id=b["id"], request_id=second, name=name, value=0.3)
    by_time = assert_exact(client, database, [name])
    assert {k[2] for k in by_time} == {record_times(client, database)[second]}
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == []
    assert listed_on(scores_api, day, **{f"score.{name}.max": 0.5}) == [second]

    # Moved by a later write, then deleted: the tombstone follows it to the record's time.
    c = created(scores_api, request_id=f"req_{tag}_3", name=name, value=1.0)
    logged(scores_api, tag, 3, day)
    created(scores_api, request_id=first, name=name, value=0.6)
    by_time = assert_exact(client, database, [name])
    assert PENDING not in {k[2] for k in by_time}
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [f"req_{tag}_3", first]
    assert scores_api.delete(f"/v1/scores/{c['id']}").status_code == 200
    assert_exact(client, database, [name])
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [first]


def test_deleting_records_takes_their_early_scores_out_of_the_sums_by_time(
    scores_api: TestClient,
) -> None:
    day, tag, keep = "2026-04-04", uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    name = f"del_{tag}"
    early, late = f"req_{tag}_1", f"req_{tag}_2"
    logged(scores_api, tag, 2, day)
    kept = logged(scores_api, keep, 3, day)
    created(scores_api, request_id=late, name=name, value=0.7)  # under its record's time
    created(scores_api, request_id=kept, name=name, value=0.8)
    created(scores_api, request_id=early, name=name, value=0.9)  # still pending when deleted
    logged(scores_api, tag, 1, day)
    deleted = scores_api.request("DELETE", "/v1/requests", json={"metadata": {"tag": tag}})
    assert deleted.status_code == 200, deleted.text
    client, database = store_client(scores_api), database_of(scores_api)
    by_time = assert_exact(client, database, [name])
    assert {k[3] for k in by_time} == {kept}
    assert listed_on(scores_api, day, **{f"score.{name}.min": 0.5}) == [kept]


def test_an_upgraded_store_keeps_every_filter_result(settings: Settings) -> None:
    rows = wide_rows("up", 3, 10)
    ids = [r.id for r in rows]
    # The score tables as releases before migration 42 made them: no ``record_at``, the
    # scores by target in compressed blocks of the defaults' size (migration 43 makes them
    # smaller).
    db = f"`{settings.database}`"
    store_before(
        settings,
        42,
        rows,
        [
            f"ALTER TABLE {db}.scores DROP COLUMN record_at",
            f"ALTER TABLE {db}.scores_by_target MODIFY SETTING min_compress_block_size = 65536, "
            "max_compress_block_size = 1048576",
        ],
    )
    client = open_client(settings.store_url)
    columns = "project, id, request_id, trace_id, name, data_type, value, value_number, "
    columns += "value_text, source, metadata, created_at, written_at, is_deleted"
    late = "req_up-late"
    old = [
        ("s1", ids[0], "q", "numeric", "0.9", "0.9", "0.9"),
        ("s2", ids[1], "q", "numeric", "0.2", "0.2", "0.2"),
        ("s3", late, "q", "numeric", "0.8", "0.8", "0.8"),  # its record not stored yet
        ("s4", ids[2], "k", "categorical", '"good"', "NULL", "good"),
        ("s5", late, "k", "categorical", '"good"', "NULL", "good"),
    ]
    values = ",".join(
        f"('default','{i}','{rid}','','{n}','{t}','{v}',{num},'{txt}','api','{{}}',"
        "now64(3),'2026-05-01 00:00:01',0)"
        for i, rid, n, t, v, num, txt in old
    )
    try:
        client.command(f"INSERT INTO `{settings.database}`.scores ({columns}) VALUES {values}")
    finally:
        client.close()
    day = "2026-05-04"
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        client, database = store_client(api), settings.database
        (made,) = client.query(
            "SELECT create_table_query FROM system.tables WHERE database = {d:String} "
            "AND name = 'scores_by_target'",
            parameters={"d": database},
        ).result_rows[0]
        assert "min_compress_block_size = 4096" in made, made
        assert "max_compress_block_size = 65536" in made, made
        by_time = assert_exact(client, database, ["q", "k"])
        times = record_times(client, database)
        assert (("q", 0, times[ids[0]], ids[0], "0.9")) in by_time
        assert ("q", 0, PENDING, late, "0.8") in by_time
        assert listed_on(api, day, **{"score.q.min": 0.5}) == [ids[0]]
        assert listed_on(api, day, **{"score.q.max": 0.5}) == [ids[1]]
        assert listed_on(api, day, **{"score.k": "good"}) == [ids[2]]
        assert listed_on(api, day, unscored="q") == [ids[2]]

        # The early scores' record lands: found, still pending.
        body = {"id": late, "created_at": f"{day}T00:10:00Z", "model": "gpt-4o-mini"}
        assert api.post("/v1/requests", json=body).status_code == 201
        assert listed_on(api, day, **{"score.q.min": 0.5}) == [late, ids[0]]
        assert listed_on(api, day, **{"score.k": "good"}) == [late, ids[2]]

        # Old versions deleted and replaced: each tombstone under the key its version was
        # summed under by the migration (PENDING for s3, deleted before any write moved it;
        # the record's time for s1).
        assert api.delete("/v1/scores/s3").status_code == 200
        assert_exact(client, database, ["q", "k"])
        created(api, id="s1", request_id=ids[0], name="q", value=0.1)
        assert_exact(client, database, ["q", "k"])
        assert listed_on(api, day, **{"score.q.min": 0.5}) == []
        assert listed_on(api, day, **{"score.q.max": 0.5}) == [ids[1], ids[0]]

        # A write of the name moves the old pending score of the landed record, then its
        # delete follows it.
        created(api, request_id=ids[1], name="k", value="bad")
        by_time = assert_exact(client, database, ["q", "k"])
        assert ("k", 0, record_times(client, database)[late], late, "good") in by_time
        assert listed_on(api, day, **{"score.k": "good"}) == [late, ids[2]]
        assert api.delete("/v1/scores/s5").status_code == 200
        assert_exact(client, database, ["q", "k"])
        assert listed_on(api, day, **{"score.k": "good"}) == [ids[2]]


def test_a_backlog_of_pending_scores_moves_over_the_writes_that_follow(
    scores_api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One record's pending sums a write (500 in the store): three writes move the three.
    monkeypatch.setattr(scores_module, "_MOVED_AT_ONCE", 1)
    day, tag = "2026-04-05", uuid.uuid4().hex[:8]
    name = f"backlog_{tag}"
    early = [f"req_{tag}_{n}" for n in (1, 2, 3)]
    for n, record in enumerate(early):
        created(scores_api, request_id=record, name=name, value=0.5 + n / 10)
    for n in (1, 2, 3):
        logged(scores_api, tag, n, day)
    client, database = store_client(scores_api), database_of(scores_api)
    other = logged(scores_api, tag, 4, day)
    pending = []
    for _ in range(4):
        by_time = assert_exact(client, database, [name])
        pending.append(len([k for k in by_time if k[2] == PENDING]))
        assert listed_on(scores_api, day, **{f"score.{name}.min": 0.55}) == early[:0:-1]
        created(scores_api, request_id=other, name=name, value=0.1)
    assert pending == [3, 2, 1, 0]
