"""``metric=score`` reads the score sums' rows as stored (helper B41, issue 31 speed).

The analytics query no longer sums ``score_sums`` by target before joining the records: a
replaced score's version, its tombstone and the new version then reach one sum in any order.
These tests hold the mean to the live scores' whatever the order and whether the parts are
merged or not.
"""

from __future__ import annotations

import random
import uuid

from fastapi.testclient import TestClient

from tests.collector.scores.steps import created, database_of, log, mean_of, optimize, store_client


def test_replaced_and_moved_scores_give_the_live_mean_merged_or_not(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    name = f"q_{tag}"
    records = [log(scores_api, tag, i) for i in range(1, 5)]
    rng = random.Random(41)
    live: dict[str, float] = {}
    # Each write its own insert (its own unmerged part of the sums): values whose float sum
    # depends on the order (0.1 + 0.2 + 0.9 - 0.9 ...), replaced and moved between records.
    for step in range(24):
        sid = f"sc_{tag}_{rng.randrange(6)}"
        value = rng.choice([0.1, 0.2, 0.3, 0.7, 0.9, 1.0 / 3])
        if sid in live and step % 5 == 4:
            assert scores_api.delete(f"/v1/scores/{sid}").status_code == 200
            del live[sid]
            continue
        created(scores_api, id=sid, request_id=rng.choice(records), name=name, value=value)
        live[sid] = value
    expected = (float(f"{sum(live.values()):.12g}") / len(live), len(live))
    assert mean_of(scores_api, tag, name) == expected
    optimize(store_client(scores_api), database_of(scores_api))
    assert mean_of(scores_api, tag, name) == expected


def test_a_category_of_the_name_counts_in_no_mean(scores_api: TestClient) -> None:
    tag = uuid.uuid4().hex[:8]
    name = f"q_{tag}"
    first, second = log(scores_api, tag, 1), log(scores_api, tag, 2)
    created(scores_api, request_id=first, name=name, value=0.4)
    created(scores_api, request_id=second, name=name, value=True)
    created(scores_api, request_id=second, name=name, value="n/a")
    assert mean_of(scores_api, tag, name) == (0.7, 2)
