"""``client.scores`` on sessions against a live collector: ``create``, ``batch`` and ``list``
take ``session_id`` (a whole conversation: its records' ``metadata.session_id``), a score
reads its ``session_id`` back, a score naming a session beside another target is refused with
the message ``promptrail.score`` drops it with, and the session's detail counts the score;
through :class:`promptrail.Client` and :class:`promptrail.AsyncClient`."""

from __future__ import annotations

import pytest

import promptrail

pytestmark = pytest.mark.anyio

TWO_TARGETS = "give exactly one of request_id, trace_id and session_id"


def test_a_score_on_a_session_is_stored_listed_and_counted_by_the_session(
    client: promptrail.Client,
) -> None:
    client.requests.log(
        prompt_name="chat", output="Paris", id="req_sess_c1", metadata={"session_id": "chat-c1"}
    )
    made = client.scores.create(
        "resolved", True, session_id="chat-c1", comment="user said thanks", id="sess-c1"
    )
    # A record whose id is the same text as the session keeps its own scores apart.
    client.scores.create("resolved", False, request_id="chat-c1")

    assert isinstance(made, promptrail.Score)
    assert (made.session_id, made.request_id, made.trace_id) == ("chat-c1", None, None)
    assert (made.value, made.comment, made.source) == (True, "user said thanks", "api")
    assert client.scores.get("sess-c1").session_id == "chat-c1"
    listed = list(client.scores.list(session_id="chat-c1"))
    assert [(s.id, s.session_id, s.value) for s in listed] == [("sess-c1", "chat-c1", True)]
    assert [s.request_id for s in client.scores.list(request_id="chat-c1")] == ["chat-c1"]
    assert client.sessions.get("chat-c1").scores == {"resolved": 1}
    # Never counted for the session's record.
    assert client.requests.get("req_sess_c1").scores == []


@pytest.mark.parametrize(
    ("targets", "field"),
    [
        ({"request_id": "req_sess_c2"}, "session_id"),
        ({"trace_id": "ab" * 16}, "session_id"),
    ],
)
def test_a_session_beside_another_target_is_a_validation_error(
    client: promptrail.Client, targets: dict[str, str], field: str
) -> None:
    with pytest.raises(promptrail.ValidationError) as refused:
        client.scores.create("resolved", True, session_id="chat-c2", id="sess-c2", **targets)

    assert refused.value.code == "VALIDATION_ERROR"
    assert refused.value.message == TWO_TARGETS
    assert refused.value.details.get("field") == field
    assert list(client.scores.list(session_id="chat-c2")) == []
    with pytest.raises(promptrail.NotFoundError):
        client.scores.get("sess-c2")


def test_batch_takes_session_scores_and_reports_a_bad_target_by_index(
    client: promptrail.Client,
) -> None:
    result = client.scores.batch(
        [
            {"name": "stars", "value": 4, "session_id": "chat-c3", "id": "sess-c3-a"},
            {"name": "stars", "value": 2, "session_id": "chat-c3", "request_id": "req_c3"},
            {"name": "stars", "value": 5, "session_id": "chat-c3", "id": "sess-c3-b"},
        ]
    )

    assert result.accepted == 2
    assert [r.index for r in result.rejected] == [1]
    assert result.rejected[0].error["message"] == TWO_TARGETS
    listed = list(client.scores.list(session_id="chat-c3", limit=1))  # two pages of one
    assert sorted((s.id, s.session_id) for s in listed) == [
        ("sess-c3-a", "chat-c3"),
        ("sess-c3-b", "chat-c3"),
    ]
    assert list(client.scores.list(request_id="req_c3")) == []


async def test_async_client_scores_and_lists_a_session(aclient: promptrail.AsyncClient) -> None:
    made = await aclient.scores.create("mood", "calm", session_id="chat-c4", id="sess-c4")
    batch = await aclient.scores.batch(
        [{"name": "mood", "value": "tense", "session_id": "chat-c4"}]
    )
    listed = [s async for s in aclient.scores.list(session_id="chat-c4", limit=1)]
    with pytest.raises(promptrail.ValidationError) as refused:
        await aclient.scores.create("mood", "calm", session_id="chat-c4", trace_id="cd" * 16)

    assert (made.session_id, made.request_id, made.trace_id) == ("chat-c4", None, None)
    assert batch.accepted == 1
    assert sorted(s.value for s in listed) == ["calm", "tense"]
    assert {s.session_id for s in listed} == {"chat-c4"}
    assert (await aclient.scores.get("sess-c4")).session_id == "chat-c4"
    assert refused.value.message == TWO_TARGETS
