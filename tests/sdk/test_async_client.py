"""The async REST client against a live collector: the same API with ``await``/``async for``."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

import promptrail
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.keys import DEFAULT_KEY

from .conftest import RequestLog

pytestmark = pytest.mark.anyio


async def greet(
    sdk: promptrail.AsyncClient, name: str = "greet", template: str = "Say hello to {name}."
) -> promptrail.Prompt:
    return await sdk.prompts.create(name, template, "gpt-4o-mini")


# -- prompts -----------------------------------------------------------------------------------


async def test_create_get_update_delete(aclient: promptrail.AsyncClient) -> None:
    created = await aclient.prompts.create(
        "greet", "Say hello to {name}.", "gpt-4o-mini", tags=["a"], labels=["production"]
    )

    fetched = await aclient.prompts.get(created.id)
    updated = await aclient.prompts.update("greet", template="Hi {name}!")
    deleted = await aclient.prompts.delete("greet")

    assert (created.version, created.tags) == (1, ["a"])
    assert (fetched.name, fetched.template) == ("greet", "Say hello to {name}.")
    assert (updated.version, updated.template) == (2, "Hi {name}!")
    assert (deleted.deleted, deleted.id) == (True, created.id)
    with pytest.raises(promptrail.NotFoundError) as caught:
        await aclient.prompts.get("greet")
    assert caught.value.code == "PROMPT_NOT_FOUND"


async def test_list_is_an_async_iterator_across_pages(
    aclient: promptrail.AsyncClient, requests_seen: RequestLog
) -> None:
    for i in range(5):
        await greet(aclient, f"p{i}")

    names = [p.name async for p in aclient.prompts.list(limit=2)]

    assert names == ["p4", "p3", "p2", "p1", "p0"]
    assert requests_seen.count("GET /v1/prompts") == 3
    assert [p.name async for p in aclient.prompts.list(search="p3")] == ["p3"]


async def test_versions_rollback_and_labels(aclient: promptrail.AsyncClient) -> None:
    await greet(aclient)
    await aclient.prompts.update("greet", template="Hi {name}!")

    rolled = await aclient.prompts.rollback("greet", 1)
    label = await aclient.prompts.set_label("greet", "production", 2)
    versions = await aclient.prompts.versions("greet")
    second = await aclient.prompts.version("greet", 2)
    labels = await aclient.prompts.labels("greet")
    removed = await aclient.prompts.remove_label("greet", "production")

    assert (rolled.version, rolled.template) == (3, "Say hello to {name}.")
    assert (label.label, label.version) == ("production", 2)
    assert [v.version for v in versions] == [3, 2, 1]
    assert (second.labels, second.parameters) == (["production"], {})
    assert [(lb.label, lb.version) for lb in labels] == [("production", 2)]
    assert removed.deleted is True
    assert await aclient.prompts.labels("greet") == []


async def test_errors_are_typed(aclient: promptrail.AsyncClient, runs_url: str) -> None:
    await greet(aclient)

    with pytest.raises(promptrail.ConflictError) as conflict:
        await greet(aclient)
    with pytest.raises(promptrail.ValidationError) as invalid:
        await aclient.prompts.create("x", "lone { brace", "gpt-4o-mini")
    async with promptrail.AsyncClient("pr-wrong", runs_url) as stranger:
        with pytest.raises(promptrail.AuthenticationError) as unauthenticated:
            await stranger.prompts.get("greet")

    assert (conflict.value.status, conflict.value.code) == (409, "PROMPT_ALREADY_EXISTS")
    assert (invalid.value.status, invalid.value.code) == (400, "INVALID_TEMPLATE")
    assert unauthenticated.value.code == "INVALID_API_KEY"


async def test_a_collector_that_is_down_is_a_connection_error(closed_url: str) -> None:
    async with promptrail.AsyncClient(DEFAULT_KEY, closed_url, max_retries=1) as client:
        with pytest.raises(promptrail.APIConnectionError):
            await client.prompts.get("greet")


# -- templates ---------------------------------------------------------------------------------


async def test_template_is_cached_and_renders(
    aclient: promptrail.AsyncClient, requests_seen: RequestLog
) -> None:
    await aclient.prompts.create("greet", "Say hello to {name}.", "gpt-4o-mini", labels=["prod"])

    first = await aclient.prompts.template("greet", label="prod")
    second = await aclient.prompts.template("greet", label="prod")

    assert second is first
    assert requests_seen.count("/template") == 1
    assert first.render(name="Ada") == "Say hello to Ada."
    with pytest.raises(promptrail.MissingVariablesError):
        first.render()


async def test_template_falls_back_to_the_stale_copy_when_the_collector_is_down(
    run_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(create_app(run_settings)) as url:
        client = promptrail.AsyncClient(DEFAULT_KEY, url, template_ttl=0.05, max_retries=0)
        await greet(client)
        fetched = await client.prompts.template("greet")
    time.sleep(0.1)

    async with client:
        with caplog.at_level(logging.WARNING, logger="promptrail"):
            served = await client.prompts.template("greet")
        with pytest.raises(promptrail.APIConnectionError):
            await client.prompts.template("greet", version=1)

    assert served is fetched
    assert "serving the cached template" in caplog.text


# -- runs --------------------------------------------------------------------------------------


async def test_run_whole_and_streamed(
    aclient: promptrail.AsyncClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Hello there Ada"
    await greet(aclient)

    result = await aclient.prompts.run("greet", variables={"name": "Ada"}, metadata={"k": "v"})
    async with await aclient.prompts.run(
        "greet", variables={"name": "Ada"}, user_input="Be brief", stream=True
    ) as stream:
        events = [event async for event in stream]

    assert (result.output, result.version, result.metadata) == ("Hello there Ada", 1, {"k": "v"})
    assert [e["type"] for e in events] == ["start", "chunk", "chunk", "chunk", "end"]
    assert stream.output == "Hello there Ada"
    assert stream.usage is not None and stream.usage["completion_tokens"] == 3
    assert openai_stub.calls[1].body["messages"] == [
        {"role": "system", "content": "Say hello to Ada."},
        {"role": "user", "content": "Be brief"},
    ]


async def test_run_by_label_and_its_errors(
    aclient: promptrail.AsyncClient, openai_stub: OpenAIStub
) -> None:
    await aclient.prompts.create("greet", "Hi {name} in {city}", "gpt-4o-mini", labels=["prod"])

    result = await aclient.prompts.run("greet", label="prod", variables={"name": "A", "city": "B"})
    with pytest.raises(promptrail.ValidationError) as missing:
        await aclient.prompts.run("greet", version=1, stream=True)
    openai_stub.script.failures = [400]
    with pytest.raises(promptrail.ProviderError) as failed:
        await aclient.prompts.run("greet", variables={"name": "A", "city": "B"})

    assert result.version == 1
    assert missing.value.details["missing_variables"] == ["city", "name"]
    assert failed.value.details["request_id"].startswith("req_")


# -- request log -------------------------------------------------------------------------------


async def test_log_get_list_and_search(aclient: promptrail.AsyncClient) -> None:
    now = datetime.now(UTC)
    logged = await aclient.requests.log(
        prompt_name="greet", output={"summary": "Paris is lovely"}, created_at=now
    )
    batch = await aclient.requests.log_batch(
        [
            {"id": f"req_a{i}", "created_at": now - timedelta(minutes=i + 1), "output": "x"}
            for i in range(3)
        ]
    )

    detail = await aclient.requests.get(logged.id)
    listed = [r.id async for r in aclient.requests.list(limit=2)]
    hits = [h async for h in aclient.requests.search("paris", limit=1)]
    greet_only = [r.id async for r in aclient.requests.list(prompt_name="greet")]

    assert batch.accepted == 3
    assert detail.output == {"summary": "Paris is lovely"}
    assert listed == [logged.id, "req_a0", "req_a1", "req_a2"]
    assert [(h.id, h.matched_fields) for h in hits] == [(logged.id, ["output.summary"])]
    assert greet_only == [logged.id]
    with pytest.raises(promptrail.NotFoundError) as caught:
        await aclient.requests.get("req_missing")
    assert caught.value.code == "REQUEST_NOT_FOUND"


async def test_export_delete_and_analytics(aclient: promptrail.AsyncClient) -> None:
    await aclient.requests.log_batch(
        [
            {"prompt_name": "a", "latency_ms": 100, "metadata": {"user": "u1"}},
            {"prompt_name": "a", "latency_ms": 300, "metadata": {"user": "u2"}},
        ]
    )

    job = await aclient.requests.export(format="json")
    done = await aclient.requests.wait_for_export(job.export_id, poll_interval=0.05)
    exported = await aclient.requests.download(job.export_id)
    latency = await aclient.requests.analytics("latency", group_by="prompt_name")
    deleted = await aclient.requests.delete({"user": "u1"})
    status = await aclient.requests.export_status(job.export_id)

    assert (done.status, done.row_count) == ("completed", 2)
    assert len(exported.decode().splitlines()) == 2
    assert (latency.total, latency.groups[0].name, latency.groups[0].count) == (200, "a", 2)
    assert latency.groups[0].p50 is not None
    assert deleted.deleted_count == 1
    assert status.export_id == job.export_id
    assert [r.metadata async for r in aclient.requests.list()] == [{"user": "u2"}]


async def test_async_client_uses_its_own_http_client_by_default(runs_url: str) -> None:
    async with promptrail.AsyncClient(DEFAULT_KEY, runs_url + "/api") as client:
        await greet(client)
        assert client.base_url == runs_url + "/api"
        assert [p.name async for p in client.prompts.list()] == ["greet"]


async def test_retries_gets_on_503_with_a_mock_transport() -> None:
    answers = iter([503, 200])

    def collector(request: httpx.Request) -> httpx.Response:
        if next(answers) == 503:
            return httpx.Response(503, json={"error": {"code": "STORE_UNAVAILABLE"}})
        return httpx.Response(200, json={"data": [], "pagination": {"has_more": False}})

    http = httpx.AsyncClient(transport=httpx.MockTransport(collector))
    async with http, promptrail.AsyncClient(DEFAULT_KEY, "http://c", http_client=http) as client:
        assert await client.prompts.versions("greet") == []
