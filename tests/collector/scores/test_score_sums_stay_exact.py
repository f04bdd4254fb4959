"""The per-target score sums (migration 16) stay exact: replacements, moves, deletes, races.

Score filters and ``metric=score`` analytics read ``score_sums``, kept by a view from every
score row inserted (collector/store/DESIGN.md, "Scores"). These tests change scores every way the
API allows and compare the sums with the reference: each id's newest version, resolved from
``scores`` itself, summed in Python; then the filters and analytics against the same truth.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.models.scores import ScoreIn
from promptrail.collector.store import migrations
from promptrail.collector.store.schema import Migration
from promptrail.collector.store.score_tables import SCORE_SUMS_SEED
from tests.collector.scores.steps import (
    Sums,
    created,
    database_of,
    listed,
    log,
    mean_of,
    optimize,
    reference_sums,
    scores_upgraded,
    store_client,
)


def stored_sums(client: Any, database: str, names: list[str]) -> Sums:
    """What ``score_sums`` says per (name, on_trace, target, value), zero keys left out."""
    rows = client.query(
        "SELECT name, on_trace, target, value_text, sum(total), sum(numbers), sum(scores) "
        f"FROM `{database}`.score_sums WHERE project = 'default' AND name IN {{n:Array(String)}} "
        "GROUP BY name, on_trace, target, value_text",
        parameters={"n": names},
    ).result_rows
    return {
        (r[0], int(r[1]), r[2], r[3]): (round(float(r[4]), 9), int(r[5]), int(r[6]))
        for r in rows
        if (int(r[5]), int(r[6])) != (0, 0) or abs(float(r[4])) > 1e-9
    }


def test_replacing_moving_and_deleting_scores_leaves_no_stale_sum(scores_api: TestClient) -> None:
    tag = uuid.uuid4().hex[:8]
    first, second = log(scores_api, tag, 1), log(scores_api, tag, 2)
    name, kind = f"q_{tag}", f"k_{tag}"
    high = created(scores_api, request_id=first, name=name, value=0.9)
    created(scores_api, request_id=second, name=kind, value="good")
    assert [i["id"] for i in listed(scores_api, tag, **{f"score.{name}.min": 0.8})] == [first]

    # Replaced with another value and moved to the other record: the first has no score left.
    created(scores_api, id=high["id"], request_id=second, name=name, value=0.1)
    assert listed(scores_api, tag, **{f"score.{name}.min": 0.8}) == []
    assert [i["id"] for i in listed(scores_api, tag, **{f"score.{name}.max": 0.2})] == [second]
    assert [i["id"] for i in listed(scores_api, tag, unscored=name)] == [first]
    # A category replaced by another no longer matches the old one.
    moved = scores_api.get("/v1/scores", params={"request_id": second, "name": kind})
    (category,) = moved.json()["data"]
    created(scores_api, id=category["id"], request_id=second, name=kind, value="bad")
    assert listed(scores_api, tag, **{f"score.{kind}": "good"}) == []
    assert [i["id"] for i in listed(scores_api, tag, **{f"score.{kind}": "bad"})] == [second]
    # A retry of the same score changes nothing.
    created(scores_api, id=category["id"], request_id=second, name=kind, value="bad")
    assert mean_of(scores_api, tag, name) == (0.1, 1)
    client, database = store_client(scores_api), database_of(scores_api)
    assert stored_sums(client, database, [name, kind]) == reference_sums(
        client, database, [name, kind]
    )

    assert scores_api.delete(f"/v1/scores/{high['id']}").status_code == 200
    assert listed(scores_api, tag, **{f"score.{name}.max": 0.2}) == []
    assert {i["id"] for i in listed(scores_api, tag, unscored=name)} == {first, second}
    assert mean_of(scores_api, tag, name) == (0, 0)
    # Merged, the sums hold no row for a name whose scores are all gone.
    optimize(client, database)
    assert stored_sums(client, database, [name]) == {}
    assert listed(scores_api, tag, **{f"score.{name}.max": 0.2}) == []


def test_random_changes_keep_the_sums_equal_to_the_live_scores(scores_api: TestClient) -> None:
    rng = random.Random(31)
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    records = [log(scores_api, tag, n, trace if n < 3 else None) for n in range(6)]
    names = [f"a_{tag}", f"b_{tag}"]
    ids = [f"sc_{tag}_{i}" for i in range(12)]
    values: list[Any] = [0.0, 0.25, 0.5, 1, 1.0, True, False, "x", "y"]
    live: dict[str, dict[str, Any]] = {}
    for step in range(80):
        choice = rng.random()
        sid = rng.choice(ids)
        if choice < 0.15 and sid in live:
            assert scores_api.delete(f"/v1/scores/{sid}").status_code == 200
            del live[sid]
            continue
        value = rng.choice(values)
        name = names[0] if not isinstance(value, str) else names[1]
        target = {"trace_id": trace} if rng.random() < 0.2 else {"request_id": rng.choice(records)}
        if choice < 0.35:  # a batch, the id twice in it: the last one stands
            other = rng.choice(values[:5])
            batch = [
                {"id": sid, "name": names[0], "value": other, **target},
                {"id": sid, "name": name, "value": value, **target},
            ]
            response = scores_api.post("/v1/scores/batch", json={"scores": batch})
            assert response.status_code == 201, response.text
        else:
            created(scores_api, id=sid, name=name, value=value, **target)
        live[sid] = {"name": name, "value": value, **target}
        if step % 20 == 19:
            client, database = store_client(scores_api), database_of(scores_api)
            assert stored_sums(client, database, names) == reference_sums(client, database, names)
    client, database = store_client(scores_api), database_of(scores_api)
    optimize(client, database)
    assert stored_sums(client, database, names) == reference_sums(client, database, names)

    # The filters agree with the live scores (a record's own and its trace's).
    def mean(record: str) -> float | None:
        numbers = [
            float(s["value"])
            for s in live.values()
            if s["name"] == names[0]
            and (s.get("request_id") == record or (record in records[:3] and "trace_id" in s))
        ]
        return sum(numbers) / len(numbers) if numbers else None

    for bound in (0.0, 0.3, 0.6, 1.0):
        expected = {r for r in records if (m := mean(r)) is not None and m >= bound - 1e-12}
        got = {i["id"] for i in listed(scores_api, tag, **{f"score.{names[0]}.min": bound})}
        assert got == expected, bound
    unscored = {r for r in records if mean(r) is None}
    assert {i["id"] for i in listed(scores_api, tag, unscored=names[0])} == unscored


def test_concurrent_writes_of_one_id_end_each_version_once(scores_api: TestClient) -> None:
    tag = uuid.uuid4().hex[:8]
    records = [log(scores_api, tag, n) for n in range(4)]
    name, sid = f"race_{tag}", f"sc_race_{tag}"
    service = scores_api.app.state.services.scores

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(15):
            body = ScoreIn(id=sid, request_id=rng.choice(records), name=name, value=rng.random())
            service.create("default", body)
        service.delete_on_records("default", records[:1])

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client, database = store_client(scores_api), database_of(scores_api)
    sums = stored_sums(client, database, [name])
    assert sums == reference_sums(client, database, [name])
    assert sum(count for _, _, count in sums.values()) <= 1


@pytest.fixture
def upgraded(settings: Settings) -> Iterator[tuple[Any, str]]:
    """A store as release 15 left it, with scores written the old way (no tombstone before
    a replacement), upgraded by migration 16."""
    with scores_upgraded(settings, 16) as store:
        yield store


def test_migration_16_sums_the_scores_already_stored_once(upgraded: tuple[Any, str]) -> None:
    client, database = upgraded
    assert stored_sums(client, database, ["q"]) == {
        ("q", 0, "r2", "0.2"): (0.2, 1, 1),
        ("q", 1, "t1", "true"): (1.0, 1, 1),
    }
    assert stored_sums(client, database, ["q"]) == reference_sums(client, database, ["q"])
    # The seed writes into an empty table only: run again, it adds nothing.
    (seed,) = migrations.migration_statements(
        Migration(16, "again", (SCORE_SUMS_SEED,)), database, None
    )
    client.command(seed)
    assert stored_sums(client, database, ["q"])[("q", 0, "r2", "0.2")] == (0.2, 1, 1)
    # The target index knows the live scores' targets (a detail finds them by it).
    targets = client.query(
        f"SELECT target, id FROM `{database}`.score_targets WHERE project = 'default' "
        "ORDER BY target, id"
    ).result_rows
    assert ("r2", "sc1") in targets and ("t1", "sc3") in targets


def test_deleting_records_by_metadata_takes_their_scores_out_of_the_sums(
    scores_api: TestClient,
) -> None:
    tag, keep = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    gone, kept = log(scores_api, tag, 1), log(scores_api, keep, 1)
    name = f"del_{tag}"
    first = created(scores_api, request_id=gone, name=name, value=0.9)
    created(scores_api, id=first["id"], request_id=gone, name=name, value=0.7)  # replaced
    created(scores_api, request_id=gone, name=name, value=True)
    created(scores_api, request_id=kept, name=name, value=0.2)
    deleted = scores_api.request("DELETE", "/v1/requests", json={"metadata": {"tag": tag}})
    assert deleted.status_code == 200, deleted.text
    client, database = store_client(scores_api), database_of(scores_api)
    sums = stored_sums(client, database, [name])
    assert sums == reference_sums(client, database, [name])
    assert sums == {(name, 0, kept, "0.2"): (0.2, 1, 1)}
    assert mean_of(scores_api, keep, name) == (0.2, 1)
