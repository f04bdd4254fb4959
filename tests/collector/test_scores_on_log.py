"""Scores on the request log (CONTRACT 9, issue 31 point 2): detail, list items, filters.

One collector for the module; each test logs records under a metadata tag of its own and
lists with that tag, so tests never see each other's records.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.test_scores import assert_error, created, other_api, scores_api

__all__ = ["other_api", "scores_api"]  # the module's shared collector


def log(api: TestClient, tag: str, n: int, trace: str | None = None, **extra: Any) -> str:
    """Log one record tagged ``tag``; return its id."""
    record_id = f"req_{tag}_{n}"
    body: dict[str, Any] = {
        "id": record_id,
        "created_at": f"2026-03-01T10:00:{n:02d}Z",
        "model": "gpt-4o-mini",
        "output": {"content": f"answer {n}"},
        "metadata": {"tag": tag},
        **extra,
    }
    if trace:
        body |= {"trace_id": trace, "span_id": f"{n:016x}"}
    response = api.post("/v1/requests", json=body)
    assert response.status_code == 201, response.text
    return record_id


def listed(api: TestClient, tag: str, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/v1/requests", params={"metadata.tag": tag, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]
    return items


def test_the_detail_carries_its_own_and_its_trace_s_scores_newest_first(
    scores_api: TestClient,
) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    # A score that arrives before its record is kept and shows once the record lands.
    early = created(scores_api, request_id=f"req_{tag}_1", name="helpful", value=0.5)
    record = log(scores_api, tag, 1, trace)
    on_trace = created(scores_api, trace_id=trace, name="resolved", value=True)
    late = created(scores_api, request_id=record, name="tone", value="kind")
    created(scores_api, request_id=log(scores_api, tag, 2), name="helpful", value=0.1)
    detail = scores_api.get(f"/v1/requests/{record}").json()["data"]
    assert detail["scores"] == [late, on_trace, early]
    plain = scores_api.get(f"/v1/requests/{log(scores_api, tag, 3)}").json()["data"]
    assert plain["scores"] == []


def test_list_items_carry_the_mean_or_the_newest_category(scores_api: TestClient) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    first = log(scores_api, tag, 1, trace)
    second = log(scores_api, tag, 2)
    log(scores_api, tag, 3)
    created(scores_api, request_id=first, name="helpful", value=1)
    created(scores_api, trace_id=trace, name="helpful", value=0.5)
    created(scores_api, request_id=first, name="thumb", value=True)
    created(scores_api, request_id=first, name="thumb", value=False)
    created(scores_api, request_id=second, name="tone", value="rude")
    created(scores_api, request_id=second, name="tone", value="kind")
    items = {item["id"]: item["scores"] for item in listed(scores_api, tag)}
    assert items[first] == {"helpful": 0.75, "thumb": 0.5}
    assert items[second] == {"tone": "kind"}
    assert items[f"req_{tag}_3"] == {}


def test_filters_by_score_bounds_value_and_unscored(scores_api: TestClient) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    ids = [log(scores_api, tag, n, trace if n == 4 else None) for n in range(6)]
    for n, value in enumerate([0.1, 0.5, 0.9]):
        created(scores_api, request_id=ids[n], name="helpful", value=value)
    created(scores_api, request_id=ids[2], name="helpful", value=0.7)  # mean 0.8
    created(scores_api, trace_id=trace, name="helpful", value=1.0)  # record 4 via its trace
    created(scores_api, request_id=ids[0], name="tone", value="rude")
    created(scores_api, request_id=ids[1], name="thumb", value=True)
    created(scores_api, trace_id=trace, name="tone", value="kind")

    def ids_of(**params: Any) -> list[str]:
        return [item["id"] for item in listed(scores_api, tag, **params)]

    assert ids_of(**{"score.helpful.min": 0.5}) == [ids[4], ids[2], ids[1]]
    assert ids_of(**{"score.helpful.max": 0.5}) == [ids[1], ids[0]]
    assert ids_of(**{"score.helpful.min": 0.5, "score.helpful.max": 0.8}) == [ids[2], ids[1]]
    assert ids_of(**{"score.tone": "kind"}) == [ids[4]]
    assert ids_of(**{"score.thumb": "true"}) == [ids[1]]
    assert ids_of(unscored="helpful") == [ids[5], ids[3]]
    assert ids_of(unscored="tone") == [ids[5], ids[3], ids[2], ids[1]]
    assert ids_of(**{"score.helpful.min": 0.5, "unscored": "thumb"}) == [ids[4], ids[2]]
    # Without the metadata filter too (the scan path, not the metadata index).
    everything = scores_api.get(
        "/v1/requests", params={"score.helpful.min": 0.95, "limit": 100}
    ).json()["data"]
    assert ids[4] in [item["id"] for item in everything]
    assert ids[2] not in [item["id"] for item in everything]


def test_bad_score_filters_are_400_naming_them(scores_api: TestClient) -> None:
    for params, field in (
        ({"score.helpful.min": "high"}, "score.helpful.min"),
        ({"score.helpful.max": "nan"}, "score.helpful.max"),
        ({"score..min": "1"}, "score..min"),
        ({"unscored": ""}, "unscored"),
    ):
        assert_error(scores_api.get("/v1/requests", params=params), 400, "VALIDATION_ERROR", field)


def test_another_project_s_scores_never_show_on_this_project_s_records(
    scores_api: TestClient, other_api: TestClient
) -> None:
    tag = uuid.uuid4().hex[:8]
    record = log(scores_api, tag, 1)
    theirs = other_api.post(
        "/v1/scores", json={"request_id": record, "name": "helpful", "value": 0.0}
    )
    assert theirs.status_code == 201, theirs.text
    assert scores_api.get(f"/v1/requests/{record}").json()["data"]["scores"] == []
    assert listed(scores_api, tag)[0]["scores"] == {}
    assert [i["id"] for i in listed(scores_api, tag, unscored="helpful")] == [record]
