"""``client.scores`` on a live collector: create, batch, list (cursors), get, delete, tokens and
score configs, through :class:`promptrail.Client` and :class:`promptrail.AsyncClient`."""

from __future__ import annotations

import httpx
import pytest

import promptrail
from tests.sdk.conftest import RequestLog

pytestmark = pytest.mark.anyio


def test_create_get_list_delete(client: promptrail.Client, requests_seen: RequestLog) -> None:
    made = client.scores.create(
        "helpfulness", 0.5, request_id="req_c1", comment="ok", correction="better", id="s-1"
    )
    again = client.scores.create("helpfulness", 0.9, request_id="req_c1", id="s-1")

    assert isinstance(made, promptrail.Score)
    assert (made.id, made.value, made.data_type, made.source) == ("s-1", 0.5, "numeric", "api")
    assert (made.comment, made.correction) == ("ok", "better")
    assert client.scores.get("s-1").value == again.value == 0.9  # the same id replaced it
    assert [s.id for s in client.scores.list(request_id="req_c1")] == ["s-1"]

    gone = client.scores.delete("s-1")
    assert gone.id == "s-1"
    with pytest.raises(promptrail.NotFoundError) as missing:
        client.scores.get("s-1")
    assert missing.value.code == "SCORE_NOT_FOUND"


def test_list_follows_cursors_newest_first(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    result = client.scores.batch(
        [{"name": "n", "value": n, "trace_id": "cd" * 16, "id": f"b-{n}"} for n in range(5)]
        + [{"name": "n", "value": 1}]  # no target: rejected, the others kept
    )
    sent = requests_seen.count("GET /v1/scores")

    listed = list(client.scores.list(trace_id="cd" * 16, limit=2))

    assert result.accepted == 5
    assert [r.index for r in result.rejected] == [5]
    assert result.rejected[0].error["code"] == "VALIDATION_ERROR"
    assert sorted(s.id for s in listed) == [f"b-{n}" for n in range(5)]
    assert requests_seen.count("GET /v1/scores") - sent == 3  # pages of 2, 2 and 1
    assert [s.created_at for s in listed] == sorted((s.created_at for s in listed), reverse=True)


def test_configs_validate_and_a_bad_score_is_a_validation_error(
    client: promptrail.Client,
) -> None:
    config = client.scores.set_config("stars", "numeric", min=1, max=5, description="1-5")

    assert (config.name, config.data_type, config.min, config.max) == ("stars", "numeric", 1, 5)
    assert [c.name for c in client.scores.configs()] == ["stars"]
    with pytest.raises(promptrail.ValidationError) as refused:
        client.scores.create("stars", 9, request_id="req_c2")
    assert refused.value.code == "VALIDATION_ERROR"
    assert refused.value.details.get("field") == "value"


def test_token_from_the_api_takes_one_browser_vote(client: promptrail.Client) -> None:
    minted = client.scores.token("thumbs", request_id="req_c3", data_type="boolean", ttl_seconds=60)

    assert isinstance(minted, promptrail.FeedbackToken)
    assert minted.url == f"/v1/feedback/{minted.token}"
    vote = httpx.post(client.base_url + minted.url, json={"value": False, "comment": "no"})
    assert vote.status_code == 201, vote.text
    stored = list(client.scores.list(request_id="req_c3", source="end_user"))
    assert [(s.value, s.comment, s.source) for s in stored] == [(False, "no", "end_user")]


async def test_async_client_does_the_same(aclient: promptrail.AsyncClient) -> None:
    made = await aclient.scores.create("mood", "happy", trace_id="ef" * 16, id="a-1")
    batch = await aclient.scores.batch([{"name": "mood", "value": "sad", "trace_id": "ef" * 16}])
    listed = [s async for s in aclient.scores.list(trace_id="ef" * 16, limit=1)]
    token = await aclient.scores.token("mood", trace_id="ef" * 16, categories=["happy", "sad"])
    config = await aclient.scores.set_config("mood", "categorical", categories=["happy", "sad"])

    assert (made.value, made.data_type) == ("happy", "categorical")
    assert batch.accepted == 1
    assert {s.value for s in listed} == {"happy", "sad"}
    assert (await aclient.scores.get("a-1")).value == "happy"
    assert token.token.startswith("pft_")
    assert config.categories == ["happy", "sad"]
    assert [c.name for c in await aclient.scores.configs()] == ["mood"]
    assert (await aclient.scores.delete("a-1")).id == "a-1"
    with pytest.raises(promptrail.NotFoundError):
        await aclient.scores.get("a-1")


def test_records_carry_their_scores_in_the_detail_and_the_list(client: promptrail.Client) -> None:
    logged = client.requests.log(prompt_name="scored", output="Rome", id="req_scored_1")
    client.scores.create("stars", 2, request_id=logged.id)
    client.scores.create("stars", 4, request_id=logged.id)
    client.scores.create("verdict", "wrong", request_id=logged.id, correction="Paris")

    detail = client.requests.get(logged.id)
    (item,) = client.requests.list(prompt_name="scored")

    assert isinstance(detail.scores, list)
    assert all(isinstance(s, promptrail.Score) for s in detail.scores)
    assert sorted((s.name, s.value) for s in detail.scores) == [
        ("stars", 2),
        ("stars", 4),
        ("verdict", "wrong"),
    ]
    assert item.scores == {"stars": 3, "verdict": "wrong"}


def test_list_filters_by_score_and_analytics_averages_a_score(client: promptrail.Client) -> None:
    for n, (prompt, stars) in enumerate([("good", 5), ("good", 4), ("bad", 1), ("bad", None)]):
        logged = client.requests.log(prompt_name=prompt, output="x", id=f"req_filter_{n}")
        if stars is not None:
            client.scores.create("stars", stars, request_id=logged.id)
            client.scores.create("liked", stars > 2, request_id=logged.id)

    high = {r.id for r in client.requests.list(scores={"stars.min": 4})}
    low = {r.id for r in client.requests.list(scores={"stars.max": 2})}
    liked = {r.id for r in client.requests.list(scores={"liked": True})}
    unscored = {r.id for r in client.requests.list(unscored="stars")}
    by_prompt = client.requests.analytics("score", score_name="stars", group_by="prompt_name")

    assert high == liked == {"req_filter_0", "req_filter_1"}
    assert low == {"req_filter_2"}
    assert unscored == {"req_filter_3"}
    assert (by_prompt.total, by_prompt.score_count) == (pytest.approx(10 / 3), 3)
    assert {g.name: g.value for g in by_prompt.groups} == {"good": 4.5, "bad": 1}
