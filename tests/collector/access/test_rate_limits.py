"""Limits per project (issue 25, point 4; docs/security.md): over its request rate or its
ingest volume a project gets 429 RATE_LIMITED with ``Retry-After``; a refused batch stores
nothing; each project counts apart; the window passes and the project goes on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.errors import RequestNotFound
from tests.keys import DEFAULT_AUTH

Start = Callable[..., TestClient]


@pytest.fixture
def start(settings: Settings) -> Iterator[Start]:
    """Start a collector with the given settings (limits) as project default."""
    with ExitStack() as stack:

        def started(**limits: Any) -> TestClient:
            # Through the constructor, so the limits are validated as the environment's are.
            configured = Settings(**{**settings.model_dump(), **limits})
            client = TestClient(create_app(configured), headers=DEFAULT_AUTH)
            return stack.enter_context(client)

        yield started


def as_project(api: TestClient, project: str) -> TestClient:
    """A client of the same collector with a new key of ``project``."""
    key = api.app.state.services.keys.create(project)
    return TestClient(api.app, headers={"X-API-Key": key})


def assert_limited(response: httpx.Response, project: str, limit: str, rate: str) -> int:
    """Check the 429's body and header; return its Retry-After."""
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("RATE_LIMITED", "rate_limit_error"), error
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    assert error["details"] == {
        "project": project,
        "limit": limit,
        "rate": rate,
        "retry_after": int(retry_after),
    }
    assert project in error["message"] and limit in error["message"]
    return int(retry_after)


def batch(tag: str, count: int, **fields: Any) -> dict[str, Any]:
    """A batch body of ``count`` records with ids ``req_<tag>_<i>``."""
    return {
        "records": [
            {"id": f"req_{tag}_{i}", "model": "gpt-4o-mini", "output": "ok", **fields}
            for i in range(count)
        ]
    }


def stored_ids(api: TestClient) -> list[str]:
    page = api.get("/v1/requests", params={"limit": 100})
    assert page.status_code == 200, page.text
    return sorted(record["id"] for record in page.json()["data"])


def otlp_export(*span_ids: str) -> dict[str, Any]:
    """An OTLP JSON export of one model-call span per id."""
    spans = [
        {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": span_id,
            "name": "chat gpt-4o-mini",
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000750000000",
            "attributes": [
                {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
            ],
        }
        for span_id in span_ids
    ]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def until_admitted(send: Callable[[], httpx.Response]) -> httpx.Response:
    """Send until the answer is not a 429 (polling, bounded); return that answer."""
    for _ in range(300):
        response = send()
        if response.status_code != 429:
            return response
        time.sleep(0.1)
    raise AssertionError("still limited after 300 tries")


def test_over_the_request_rate_is_429_with_retry_after_and_other_projects_go_on(
    start: Start,
) -> None:
    api = start(limit_requests="3/hour")
    other = as_project(api, "other")
    stranger = TestClient(api.app, headers={"X-API-Key": "pr-not-a-key"})

    # Requests without a valid key are refused as such and count against no project.
    for _ in range(5):
        refused = stranger.get("/v1/prompts")
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "INVALID_API_KEY"
    for _ in range(3):
        assert api.get("/v1/prompts").status_code == 200
    wait = assert_limited(api.get("/v1/prompts"), "default", "requests", "3 per hour")
    assert wait <= 3600
    # Every API route counts, the ingest routes too; nothing of a refused record is stored.
    logged = api.post("/v1/requests", json={"id": "req_refused", "model": "gpt-4o-mini"})
    assert_limited(logged, "default", "requests", "3 per hour")

    # Project other has its own 3 requests, whatever default did.
    for _ in range(3):
        assert other.get("/v1/prompts").status_code == 200
    assert_limited(other.get("/v1/prompts"), "other", "requests", "3 per hour")
    assert stranger.get("/v1/prompts").status_code == 401
    with pytest.raises(RequestNotFound):
        api.app.state.services.requests.get("default", "req_refused")


def test_over_its_record_volume_a_project_is_refused_and_a_refused_batch_stores_nothing(
    start: Start,
) -> None:
    api = start(limit_records="5/minute")
    other = as_project(api, "other")

    assert api.post("/v1/requests/batch", json=batch("a", 4)).json()["data"]["accepted"] == 4
    # One record of the window is left: the batch is let in whole, never cut in half.
    assert api.post("/v1/requests/batch", json=batch("b", 3)).json()["data"]["accepted"] == 3
    refused = api.post("/v1/requests/batch", json=batch("c", 2))
    wait = assert_limited(refused, "default", "records", "5 per minute")
    assert wait <= 60
    assert_limited(
        api.post("/v1/requests", json={"id": "req_one", "model": "m"}),
        "default",
        "records",
        "5 per minute",
    )
    assert_limited(
        api.post("/v1/traces", json=otlp_export("00000000000000a1")),
        "default",
        "records",
        "5 per minute",
    )

    expected = sorted([f"req_a_{i}" for i in range(4)] + [f"req_b_{i}" for i in range(3)])
    assert stored_ids(api) == expected
    # The other project's volume is its own.
    assert other.post("/v1/requests/batch", json=batch("o", 5)).status_code == 201
    assert stored_ids(other) == [f"req_o_{i}" for i in range(5)]


def test_each_ingest_route_counts_what_it_stored(start: Start) -> None:
    api = start(limit_records="3/hour")

    assert api.post("/v1/requests", json={"id": "req_single", "model": "m"}).status_code == 201
    # Two model-call spans, two records: the window of 3 is used up.
    exported = api.post("/v1/traces", json=otlp_export("00000000000000a1", "00000000000000a2"))
    assert exported.status_code == 200, exported.text
    assert_limited(
        api.post("/v1/requests/batch", json=batch("late", 1)), "default", "records", "3 per hour"
    )
    assert len(stored_ids(api)) == 3


def test_over_its_byte_volume_a_project_is_refused(start: Start) -> None:
    api = start(limit_bytes="2000/minute")

    # A body larger than the whole window is let in when the window is empty.
    big = api.post("/v1/requests/batch", json=batch("big", 1, output="x" * 3000))
    assert big.status_code == 201, big.text
    refused = api.post("/v1/requests/batch", json=batch("small", 1))
    assert_limited(refused, "default", "bytes", "2000 per minute")
    assert stored_ids(api) == ["req_big_0"]


# The windows below are as short as the machine allows. What these tests check needs the
# second request inside the first one's window: on a machine busy enough to take a second or
# two per request the window can pass between them, and the second is then rightly let in. So a
# window is tried at 2 s first and, only when it demonstrably passed, at 4 s, then 8 s: the test
# waits out one short window on a quiet machine instead of always a long one, and checks the
# same thing on a busy one.
WINDOWS = (2, 4, 8)


def refused_within_one_window(
    start: Start,
    kind: str,
    send: Callable[[TestClient, str], httpx.Response],
    window_passed: Callable[[float, float, int], bool],
) -> tuple[TestClient, httpx.Response, int, list[str]]:
    """Start a collector limited to one ``kind`` per window and send ``first`` then ``second``.

    Returns the client, the answer to ``second`` (a 429 unless a bug let it in), the window's
    seconds and the tags ``send`` got an admission for on windows that passed.
    ``window_passed(started, ended, window)`` says whether the window could have ended
    between the two requests (then the attempt proves nothing and a longer window is tried).
    """
    admitted: list[str] = []
    for window in WINDOWS:
        api = start(**{f"limit_{kind}": f"1 per {window} seconds"})
        started = time.time()
        first = send(api, f"first{window}")
        assert first.status_code in (200, 201), first.text
        second = send(api, f"second{window}")
        if second.status_code == 429 or not window_passed(started, time.time(), window):
            return api, second, window, admitted
        admitted += [f"first{window}", f"second{window}"]
    raise AssertionError(f"two requests never fell within one window of {WINDOWS} s")


def test_a_request_limit_lets_the_project_go_on_after_its_window(start: Start) -> None:
    def send(api: TestClient, tag: str) -> httpx.Response:
        return api.get("/v1/prompts")

    def window_passed(started: float, ended: float, window: int) -> bool:
        # A sliding window counter: its windows are the epoch's multiples of its length.
        return int(started / window) != int(ended / window)

    api, second, window, _ = refused_within_one_window(start, "requests", send, window_passed)

    wait = assert_limited(second, "default", "requests", f"1 per {window} seconds")
    assert wait <= window
    assert until_admitted(lambda: api.get("/v1/prompts")).status_code == 200


def test_a_volume_limit_lets_the_project_go_on_after_its_window(start: Start) -> None:
    def send(api: TestClient, tag: str) -> httpx.Response:
        return api.post("/v1/requests/batch", json=batch(tag, 1))

    def window_passed(started: float, ended: float, window: int) -> bool:
        # A fixed window: it opens with the first record counted, after ``started``.
        return ended - started >= window

    api, refused, window, admitted = refused_within_one_window(
        start, "records", send, window_passed
    )
    assert_limited(refused, "default", "records", f"1 per {window} seconds")

    second = f"second{window}"
    again = until_admitted(lambda: api.post("/v1/requests/batch", json=batch(second, 1)))

    assert again.status_code == 201, again.text
    expected = [*admitted, f"first{window}", second]
    assert stored_ids(api) == sorted(f"req_{tag}_0" for tag in expected)


def test_a_project_of_its_own_limits_overrides_the_defaults(start: Start) -> None:
    api = start(
        limit_requests="2/hour",
        project_limits={"bulk": {"requests": "4/hour"}, "trusted": {"requests": ""}},
    )
    bulk, trusted = as_project(api, "bulk"), as_project(api, "trusted")

    for _ in range(2):
        assert api.get("/v1/prompts").status_code == 200
    assert_limited(api.get("/v1/prompts"), "default", "requests", "2 per hour")
    for _ in range(4):
        assert bulk.get("/v1/prompts").status_code == 200
    assert_limited(bulk.get("/v1/prompts"), "bulk", "requests", "4 per hour")
    for _ in range(10):
        assert trusted.get("/v1/prompts").status_code == 200


def test_limits_are_read_from_the_environment_and_a_bad_one_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().limit_requests == ""  # none by default: a fresh collector never throttles
    monkeypatch.setenv("PROMPTRAIL_LIMIT_RECORDS", "100000/minute")
    overrides = '{"acme": {"requests": "20/second;600/minute"}}'
    monkeypatch.setenv("PROMPTRAIL_PROJECT_LIMITS", overrides)

    settings = Settings()

    assert settings.limit_records == "100000/minute"
    assert settings.project_limits["acme"].requests == "20/second;600/minute"
    with pytest.raises(ValidationError, match="limit_bytes"):
        Settings(limit_bytes="a lot")
    with pytest.raises(ValidationError, match="reqs"):
        Settings(project_limits={"acme": {"reqs": "1/second"}})
