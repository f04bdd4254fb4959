"""Scores on the request log (docs/api-notes.md, "Scores and feedback", issue 31 point 2): detail,
list items, filters.

One collector for the module; each test logs records under a metadata tag of its own and
lists with that tag, so tests never see each other's records.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.request_log.export_steps import finish, start
from tests.collector.scores.steps import assert_error, created, listed, log


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


def test_deleting_records_by_metadata_deletes_their_scores(scores_api: TestClient) -> None:
    tag, keep = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    gone = log(scores_api, tag, 1, user="u-gone")
    kept = log(scores_api, keep, 1)
    score = created(scores_api, request_id=gone, name="helpful", value=1)
    created(scores_api, request_id=gone, name="tone", value="kind")
    survivor = created(scores_api, request_id=kept, name="helpful", value=0)
    deleted = scores_api.request("DELETE", "/v1/requests", json={"metadata": {"tag": tag}})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["data"]["deleted_count"] == 1
    assert scores_api.get("/v1/scores", params={"request_id": gone}).json()["data"] == []
    assert_error(scores_api.get(f"/v1/scores/{score['id']}"), 404, "SCORE_NOT_FOUND")
    assert scores_api.get(f"/v1/scores/{survivor['id']}").json()["data"] == survivor


def test_analytics_metric_score_is_the_mean_by_every_group(scores_api: TestClient) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    base = {"start_date": "2026-03-01", "end_date": "2026-03-01"}
    filters = f'{{"metadata": {{"tag": "{tag}"}}}}'
    a1 = log(scores_api, tag, 1, prompt_name="a", version=1)
    a2 = log(scores_api, tag, 2, trace, prompt_name="a", version=2)
    a3 = log(scores_api, tag, 3, trace, prompt_name="a", version=2)
    b1 = log(scores_api, tag, 4, prompt_name="b", version=1)
    created(scores_api, request_id=a1, name="helpful", value=1.0)
    created(scores_api, request_id=a2, name="helpful", value=0.0)
    created(scores_api, trace_id=trace, name="helpful", value=True)  # on a2 and a3: once
    created(scores_api, request_id=b1, name="helpful", value=0.5)
    created(scores_api, request_id=a3, name="tone", value="kind")  # not numeric: not counted

    def run(**params: Any) -> dict[str, Any]:
        response = scores_api.get(
            "/v1/requests/analytics",
            params={"metric": "score", "score_name": "helpful", "filters": filters, **base}
            | params,
        )
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    total = run()
    assert (total["metric"], total["total"], total["score_count"]) == ("score", 0.625, 4)
    by_prompt = {g["name"]: (g["value"], g["count"]) for g in run(group_by="prompt_name")["groups"]}
    assert by_prompt == {"a": (2 / 3, 3), "b": (0.5, 1)}
    by_version = {g["name"]: (g["value"], g["count"]) for g in run(group_by="version")["groups"]}
    assert by_version == {"1": (0.75, 2), "2": (0.5, 2)}
    for group_by in ("model", "status", "day", "hour", "metadata.tag"):
        groups = run(group_by=group_by)["groups"]
        assert [(g["value"], g["count"]) for g in groups] == [(0.625, 4)], group_by
    missing = scores_api.get("/v1/requests/analytics", params={"metric": "score"})
    assert_error(missing, 400, "VALIDATION_ERROR", "score_name")


def test_analytics_metric_score_counts_a_names_first_trace_score(scores_api: TestClient) -> None:
    """A name scored only on records leaves the trace half out of the query; its first score
    on a trace, written after such a read, counts in the next one."""
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    name = f"accuracy_{tag}"
    params = {
        "metric": "score",
        "score_name": name,
        "group_by": "version",
        "filters": f'{{"metadata": {{"tag": "{tag}"}}}}',
        "start_date": "2026-03-01",
        "end_date": "2026-03-01",
    }
    first = log(scores_api, tag, 1, trace, prompt_name="a", version=1)
    second = log(scores_api, tag, 2, prompt_name="a", version=2)
    created(scores_api, request_id=first, name=name, value=0.2)
    created(scores_api, request_id=second, name=name, value=0.4)

    def by_version() -> tuple[float, dict[str, tuple[float, int]]]:
        response = scores_api.get("/v1/requests/analytics", params=params)
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        return data["total"], {g["name"]: (g["value"], g["count"]) for g in data["groups"]}

    total, groups = by_version()
    assert groups == {"1": (0.2, 1), "2": (0.4, 1)}
    assert total == pytest.approx(0.3)
    created(scores_api, trace_id=trace, name=name, value=1.0)
    total, groups = by_version()
    assert groups == {"1": (0.6, 2), "2": (0.4, 1)}
    assert total == pytest.approx((0.2 + 0.4 + 1.0) / 3)


def _export(api: TestClient, fmt: str, filters: dict[str, Any]) -> str:
    job = start(api, format=fmt, filters=filters)
    done = finish(api, job["export_id"])
    assert done["status"] == "completed", done
    response = api.get(f"/v1/requests/exports/{job['export_id']}/download")
    assert response.status_code == 200, response.text
    return response.text


def test_exports_carry_scores_and_take_the_score_filters(scores_api: TestClient) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    scored = log(scores_api, tag, 1, trace)
    plain = log(scores_api, tag, 2)
    own = created(scores_api, request_id=scored, name="helpful", value=0.9, comment='say "hi"')
    on_trace = created(scores_api, trace_id=trace, name="tone", value="kind")
    lines = [
        json.loads(line)
        for line in _export(scores_api, "json", {"metadata": {"tag": tag}}).splitlines()
    ]
    by_id = {line["id"]: line["scores"] for line in lines}
    assert by_id == {scored: [on_trace, own], plain: []}
    rows = list(csv.DictReader(io.StringIO(_export(scores_api, "csv", {"metadata": {"tag": tag}}))))
    assert {row["id"]: json.loads(row["scores"]) for row in rows} == by_id
    filtered = _export(
        scores_api, "json", {"metadata": {"tag": tag}, "score.helpful.min": 0.5}
    ).splitlines()
    assert [json.loads(line)["id"] for line in filtered] == [scored]
    queue = _export(scores_api, "json", {"metadata": {"tag": tag}, "unscored": "helpful"})
    assert [json.loads(line)["id"] for line in queue.splitlines()] == [plain]
    bad = scores_api.post(
        "/v1/requests/export", json={"format": "json", "filters": {"score.x.min": "high"}}
    )
    assert_error(bad, 400, "VALIDATION_ERROR", "filters.score.x.min")
