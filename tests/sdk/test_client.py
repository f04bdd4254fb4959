"""The sync REST client against a live collector: every method, pagination, typed errors."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

import promptrail
from promptrail._resources import AsyncPrompts, AsyncRequests, Prompts, Requests
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.keys import DEFAULT_KEY

from .conftest import RequestLog, greet

# -- prompts -----------------------------------------------------------------------------------


def test_create_returns_every_field_and_get_accepts_name_or_id(client: promptrail.Client) -> None:
    created = client.prompts.create(
        "greet",
        "Say hello to {name}.",
        "gpt-4o-mini",
        description="Greets people",
        parameters={"temperature": 0.2, "max_tokens": 50},
        tags=["onboarding", "en"],
        folder="team/growth",
    )

    assert created.id.startswith("prompt_")
    assert (created.name, created.version) == ("greet", 1)
    assert created.description == "Greets people"
    assert created.parameters == {"temperature": 0.2, "max_tokens": 50}
    assert created.tags == ["onboarding", "en"]
    assert created.folder == "/team/growth"
    assert isinstance(created.created_at, datetime)
    by_name = client.prompts.get("greet")
    by_id = client.prompts.get(created.id)
    assert by_name == by_id
    assert (by_name.template, by_name.model, by_name.version) == (
        "Say hello to {name}.",
        "gpt-4o-mini",
        1,
    )


def test_names_with_unicode_and_dots_travel_safely_in_paths(client: promptrail.Client) -> None:
    greet(client, "café.v2-beta")

    assert client.prompts.get("café.v2-beta").name == "café.v2-beta"
    assert client.prompts.template("café.v2-beta").prompt_name == "café.v2-beta"


def test_list_follows_cursors_lazily_across_pages(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    for i in range(5):
        greet(client, f"p{i}")

    prompts = client.prompts.list(limit=2)
    assert requests_seen.count("GET /v1/prompts") == 0
    first = next(prompts)
    assert requests_seen.count("GET /v1/prompts") == 1
    rest = list(prompts)

    assert [p.name for p in [first, *rest]] == ["p4", "p3", "p2", "p1", "p0"]
    assert requests_seen.count("GET /v1/prompts") == 3


def test_list_filters_by_tags_folder_and_search(client: promptrail.Client) -> None:
    greet(client, "a", tags=["x", "y"], folder="/team/a", description="alpha")
    greet(client, "b", tags=["x"], folder="/team/b")
    greet(client, "c", tags=["y"], folder="/other")

    assert [p.name for p in client.prompts.list(tags=["x", "y"])] == ["a"]
    assert [p.name for p in client.prompts.list(tags="x")] == ["b", "a"]
    assert [p.name for p in client.prompts.list(folder="/team")] == ["b", "a"]
    assert [p.name for p in client.prompts.list(search="ALPH")] == ["a"]


def test_update_versions_and_rollback(client: promptrail.Client) -> None:
    greet(client, parameters={"temperature": 0.1})

    updated = client.prompts.update("greet", template="Hi {name}!", parameters={"top_p": 0.5})
    rolled = client.prompts.rollback("greet", 1, labels=["production"])

    assert (updated.version, updated.template) == (2, "Hi {name}!")
    assert updated.updated_at is not None
    assert rolled.version == 3
    assert rolled.template == "Say hello to {name}."
    assert "version 1" in rolled.note and "version 3" in rolled.note
    versions = client.prompts.versions("greet")
    assert [v.version for v in versions] == [3, 2, 1]
    assert versions[0].labels == ["production"]
    one = client.prompts.version("greet", 2)
    assert (one.template, one.parameters) == ("Hi {name}!", {"top_p": 0.5})


def test_labels_are_set_moved_listed_and_removed(client: promptrail.Client) -> None:
    greet(client)
    client.prompts.update("greet", template="Hi {name}!")

    client.prompts.set_label("greet", "production", 1)
    moved = client.prompts.set_label("greet", "production", 2)
    client.prompts.set_label("greet", "canary", 1)

    assert (moved.label, moved.version) == ("production", 2)
    assert [(lb.label, lb.version) for lb in client.prompts.labels("greet")] == [
        ("canary", 1),
        ("production", 2),
    ]
    removed = client.prompts.remove_label("greet", "canary")
    assert (removed.deleted, removed.label) == (True, "canary")
    assert [lb.label for lb in client.prompts.labels("greet")] == ["production"]
    with pytest.raises(promptrail.NotFoundError) as caught:
        client.prompts.remove_label("greet", "canary")
    assert caught.value.code == "LABEL_NOT_FOUND"


def test_delete_hides_the_prompt(client: promptrail.Client) -> None:
    created = greet(client)

    deleted = client.prompts.delete("greet")

    assert (deleted.deleted, deleted.id) == (True, created.id)
    with pytest.raises(promptrail.NotFoundError):
        client.prompts.get("greet")
    assert list(client.prompts.list()) == []


# -- runs --------------------------------------------------------------------------------------


def test_run_returns_the_result_and_logs_it(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Hello Ada, welcome."
    greet(client)

    result = client.prompts.run("greet", variables={"name": "Ada"}, metadata={"user": "u1"})

    assert result.id.startswith("req_")
    assert result.output == "Hello Ada, welcome."
    assert (result.prompt_name, result.version, result.model) == ("greet", 1, "gpt-4o-mini")
    assert result.metadata == {"user": "u1"}
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (4, 3, 7)
    assert openai_stub.calls[0].body["messages"] == [
        {"role": "user", "content": "Say hello to Ada."}
    ]
    assert client.requests.get(result.id).output["content"] == "Hello Ada, welcome."


def test_run_addresses_a_version_or_a_label(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    greet(client)
    client.prompts.update("greet", template="Hi {name}!")
    client.prompts.set_label("greet", "production", 1)

    by_version = client.prompts.run("greet", version=2, variables={"name": "A"})
    by_label = client.prompts.run("greet", label="production", variables={"name": "B"})

    assert (by_version.version, by_label.version) == (2, 1)
    sent = [call.body["messages"][0]["content"] for call in openai_stub.calls]
    assert sent == ["Hi A!", "Say hello to B."]


def test_run_stream_yields_start_chunks_and_end(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "one two three"
    greet(client)

    with client.prompts.run("greet", variables={"name": "Ada"}, stream=True) as stream:
        events = list(stream)

    assert [e["type"] for e in events] == ["start", "chunk", "chunk", "chunk", "end"]
    assert "".join(e["content"] for e in events if e["type"] == "chunk") == "one two three"
    assert stream.output == "one two three"
    assert stream.request_id == events[0]["request_id"]
    assert stream.usage is not None and stream.usage["completion_tokens"] == 3
    assert client.requests.get(events[0]["request_id"]).status == "success"


def test_run_stream_reports_a_provider_failure_mid_stream_as_an_error_event(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "one two three"
    openai_stub.script.break_after_chunks = 1
    openai_stub.script.break_with = "error_event"
    greet(client)

    stream = client.prompts.run("greet", variables={"name": "Ada"}, stream=True)
    events = list(stream)

    assert [e["type"] for e in events] == ["start", "chunk", "error"]
    assert stream.error is not None and stream.error["code"] == "PROVIDER_ERROR"


def test_run_errors_before_the_stream_are_raised(client: promptrail.Client) -> None:
    greet(client, template="Hello {name}, from {city} on {day}")

    with pytest.raises(promptrail.NotFoundError) as not_found:
        client.prompts.run("nope", stream=True)
    with pytest.raises(promptrail.ValidationError) as missing:
        client.prompts.run("greet", variables={"city": "Paris"})

    assert not_found.value.code == "PROMPT_NOT_FOUND"
    assert missing.value.code == "INVALID_TEMPLATE"
    assert missing.value.details["missing_variables"] == ["day", "name"]


def test_provider_failure_is_a_provider_error_naming_its_record(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.failures = [400]
    greet(client)

    with pytest.raises(promptrail.ProviderError) as caught:
        client.prompts.run("greet", variables={"name": "Ada"})

    assert (caught.value.status, caught.value.code) == (502, "PROVIDER_ERROR")
    record = client.requests.get(caught.value.details["request_id"])
    assert record.status == "error"


# -- request log -------------------------------------------------------------------------------


def test_log_returns_the_detail_and_a_client_id_makes_retries_idempotent(
    client: promptrail.Client,
) -> None:
    at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    fields: promptrail.RequestLog = {
        "id": "req_client_1",
        "created_at": at,
        "prompt_name": "greet",
        "model": "gpt-4o-mini",
        "input_variables": {"name": "Ada"},
        "output": "Hello Ada",
        "metadata": {"user_id": "u1"},
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "estimated_cost_usd": 0.001},
        "latency_ms": 120,
    }

    logged = client.requests.log(**fields)
    client.requests.log(**fields)

    assert logged.id == "req_client_1"
    assert logged.created_at == at
    assert logged.output == {"content": "Hello Ada"}
    assert logged.usage.total_tokens == 5
    assert logged.timing is not None and logged.timing.total_latency_ms == 120
    assert [r.id for r in client.requests.list(start_date="2025-01-01")] == ["req_client_1"]
    assert client.requests.get("req_client_1").model == "gpt-4o-mini"


def test_log_batch_reports_accepted_and_rejected(client: promptrail.Client) -> None:
    result = client.requests.log_batch(
        [{"prompt_name": "a", "output": "x"}, {"status": "maybe"}, {"prompt_name": "b"}]
    )

    assert result.accepted == 2
    assert [r.index for r in result.rejected] == [1]
    assert result.rejected[0].error["code"] == "VALIDATION_ERROR"
    with pytest.raises(promptrail.ValidationError) as caught:
        client.requests.log_batch([{"status": "maybe"}])
    assert caught.value.details["rejected"][0]["index"] == 0


def test_request_list_follows_cursors_and_filters(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    now = datetime.now(UTC)
    client.requests.log_batch(
        [
            {
                "id": f"req_r{i}",
                "created_at": now - timedelta(minutes=i),
                "prompt_name": "even" if i % 2 == 0 else "odd",
                "status": "error" if i == 3 else "success",
                "metadata": {"team": "a" if i < 3 else "b"},
                # Records 1 and 2 are spans of one trace, 2 the child of 1.
                **(
                    {"trace_id": "ab" * 16, "span_id": f"{i:016x}", "span_name": f"s{i}"}
                    if i in (1, 2)
                    else {}
                ),
                **({"parent_span_id": f"{1:016x}"} if i == 2 else {}),
            }
            for i in range(5)
        ]
    )

    everything = [r.id for r in client.requests.list(limit=2)]

    assert everything == ["req_r0", "req_r1", "req_r2", "req_r3", "req_r4"]
    assert requests_seen.count("GET /v1/requests") == 3
    assert [r.id for r in client.requests.list(prompt_name="even")] == [
        "req_r0",
        "req_r2",
        "req_r4",
    ]
    assert [r.id for r in client.requests.list(status="error")] == ["req_r3"]
    assert [r.id for r in client.requests.list(metadata={"team": "b"}, limit=1)] == [
        "req_r3",
        "req_r4",
    ]
    assert [r.id for r in client.requests.list(end_date=now - timedelta(minutes=3.5))] == ["req_r4"]
    spans = list(client.requests.list(trace_id="ab" * 16, limit=1))
    assert [(r.id, r.span_name, r.parent_span_id) for r in spans] == [
        ("req_r1", "s1", None),
        ("req_r2", "s2", f"{1:016x}"),
    ]


def test_search_follows_cursors_and_highlights(client: promptrail.Client) -> None:
    client.requests.log_batch(
        [
            {"id": f"req_s{i}", "input_variables": {"city": f"Paris {i}"}, "output": "ok"}
            for i in range(3)
        ]
        + [{"id": "req_other", "output": "nothing here"}]
    )

    hits = list(client.requests.search("paris", limit=2))

    assert sorted(h.id for h in hits) == ["req_s0", "req_s1", "req_s2"]
    assert hits[0].matched_fields == ["input_variables.city"]
    assert "<em>Paris</em>" in hits[0].highlights["input_variables.city"]


def test_export_completes_and_downloads(client: promptrail.Client) -> None:
    client.requests.log_batch(
        [{"prompt_name": "kept", "output": "x"}, {"prompt_name": "other", "output": "y"}]
    )

    started = client.requests.export(format="csv", filters={"prompt_name": "kept"})
    finished = client.requests.wait_for_export(started.export_id, timeout=30, poll_interval=0.05)
    content = client.requests.download(started.export_id)

    assert started.status in ("processing", "completed")
    assert finished.status == "completed"
    assert finished.download_url is not None and finished.row_count == 1
    assert client.requests.export_status(started.export_id).status == "completed"
    rows = list(csv.DictReader(io.StringIO(content.decode())))
    assert [row["prompt_name"] for row in rows] == ["kept"]


def test_json_export_downloads_json_lines(client: promptrail.Client) -> None:
    client.requests.log(prompt_name="kept", metadata={"k": "v"})

    job = client.requests.export(format="json", include_metadata=True)
    client.requests.wait_for_export(job.export_id, timeout=30, poll_interval=0.05)

    lines = client.requests.download(job.export_id).decode().splitlines()
    assert [json.loads(line)["metadata"] for line in lines] == [{"k": "v"}]


def test_delete_by_metadata_and_never_everything(client: promptrail.Client) -> None:
    client.requests.log_batch(
        [{"metadata": {"user": "u1"}}, {"metadata": {"user": "u1"}}, {"metadata": {"user": "u2"}}]
    )

    deleted = client.requests.delete({"user": "u1"})

    assert deleted.deleted_count == 2
    assert [r.metadata for r in client.requests.list()] == [{"user": "u2"}]
    with pytest.raises(promptrail.ValidationError):
        client.requests.delete({})


def test_analytics_groups_and_filters(client: promptrail.Client) -> None:
    client.requests.log_batch(
        [
            {"prompt_name": "a", "usage": {"estimated_cost_usd": 0.5}, "metadata": {"env": "p"}},
            {"prompt_name": "a", "usage": {"estimated_cost_usd": 0.25}, "metadata": {"env": "d"}},
            {"prompt_name": "b", "usage": {"estimated_cost_usd": 2.0}, "metadata": {"env": "p"}},
        ]
    )

    by_prompt = client.requests.analytics("cost", group_by="prompt_name")
    filtered = client.requests.analytics(
        "cost", filters={"metadata": {"env": "p"}}, start_date=datetime.now(UTC).date()
    )

    assert by_prompt.metric == "cost"
    assert by_prompt.total == pytest.approx(2.75)
    assert [(g.name, g.value, g.count) for g in by_prompt.groups] == [
        ("b", 2.0, 1),
        ("a", 0.75, 2),
    ]
    assert by_prompt.period.start < by_prompt.period.end
    assert filtered.total == pytest.approx(2.5)


# -- errors ------------------------------------------------------------------------------------


def test_not_found_errors_carry_the_contract_code_and_details(client: promptrail.Client) -> None:
    greet(client)

    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: client.prompts.get("missing"), "PROMPT_NOT_FOUND"),
        (lambda: client.prompts.version("greet", 9), "VERSION_NOT_FOUND"),
        (lambda: client.prompts.template("greet", label="nope"), "LABEL_NOT_FOUND"),
        (lambda: client.requests.get("req_missing"), "REQUEST_NOT_FOUND"),
        (lambda: client.requests.export_status("export_missing"), "EXPORT_NOT_FOUND"),
    ]

    for action, code in cases:
        with pytest.raises(promptrail.NotFoundError) as caught:
            action()
        assert (caught.value.status, caught.value.code) == (404, code)
        assert caught.value.type == "not_found_error"
    with pytest.raises(promptrail.NotFoundError) as caught:
        client.prompts.get("missing")
    assert caught.value.details == {"prompt_name": "missing"}
    assert str(caught.value) == "404 PROMPT_NOT_FOUND: Prompt 'missing' not found"


def test_conflict_and_validation_errors(client: promptrail.Client) -> None:
    greet(client)

    with pytest.raises(promptrail.ConflictError) as conflict:
        greet(client)
    with pytest.raises(promptrail.ValidationError) as bad_parameters:
        greet(client, "other", parameters={"temperature": 5})
    with pytest.raises(promptrail.ValidationError) as bad_template:
        greet(client, "other", template="a lone { brace")

    assert (conflict.value.status, conflict.value.code) == (409, "PROMPT_ALREADY_EXISTS")
    assert conflict.value.details == {"prompt_name": "greet"}
    assert (bad_parameters.value.status, bad_parameters.value.code) == (400, "VALIDATION_ERROR")
    assert bad_parameters.value.details["field"] == "parameters"
    assert bad_template.value.code == "INVALID_TEMPLATE"
    assert "position" in bad_template.value.details


def test_a_wrong_key_is_an_authentication_error(runs_url: str) -> None:
    with (
        promptrail.Client("pr-wrong", runs_url) as client,
        pytest.raises(promptrail.AuthenticationError) as caught,
    ):
        client.prompts.get("greet")

    assert (caught.value.status, caught.value.code) == (401, "INVALID_API_KEY")
    assert caught.value.type == "authentication_error"


def test_a_missing_key_says_how_to_give_one(runs_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMPTRAIL_API_KEY", raising=False)

    with (
        promptrail.Client(base_url=runs_url) as client,
        pytest.raises(promptrail.AuthenticationError, match="PROMPTRAIL_API_KEY"),
    ):
        client.prompts.get("greet")


@pytest.fixture
def small_body_url(run_settings: Settings) -> Iterator[str]:
    """A collector refusing bodies over 2 KiB."""
    with serve(create_app(run_settings.model_copy(update={"max_body_bytes": 2048}))) as url:
        yield url


def test_a_body_over_the_limit_is_payload_too_large(small_body_url: str) -> None:
    with (
        promptrail.Client(DEFAULT_KEY, small_body_url) as client,
        pytest.raises(promptrail.PayloadTooLargeError) as caught,
    ):
        client.requests.log(output="x" * 10_000)

    assert (caught.value.status, caught.value.code) == (413, "PAYLOAD_TOO_LARGE")


# -- configuration and transport ---------------------------------------------------------------


def test_environment_gives_the_key_and_url(runs_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTRAIL_API_KEY", DEFAULT_KEY)
    monkeypatch.setenv("PROMPTRAIL_BASE_URL", runs_url + "/")

    with promptrail.Client() as client:
        greet(client)
        assert client.base_url == runs_url
        assert client.prompts.get("greet").version == 1


@pytest.mark.parametrize("suffix", ["/api", "/v1", "/api/v1"])
def test_base_url_may_carry_the_api_prefix(runs_url: str, suffix: str) -> None:
    with promptrail.Client(DEFAULT_KEY, runs_url + suffix) as client:
        assert greet(client).name == "greet"
        assert [p.name for p in client.prompts.list()] == ["greet"]


def test_a_collector_that_is_down_is_a_connection_error_after_retrying_gets(
    closed_url: str,
) -> None:
    seen = RequestLog()
    http = httpx.Client(event_hooks={"request": [seen]})
    with (
        http,
        promptrail.Client(DEFAULT_KEY, closed_url, max_retries=2, http_client=http) as client,
    ):
        with pytest.raises(promptrail.APIConnectionError) as caught:
            client.prompts.get("greet")
        with pytest.raises(promptrail.APIConnectionError):
            client.requests.log(output="x")

    assert caught.value.status is None
    assert closed_url in str(caught.value)
    assert seen.sent == ["GET /v1/prompts/greet"] * 3 + ["POST /v1/requests"]


def test_gets_are_retried_on_503_and_posts_are_not() -> None:
    answers = iter([503, 502, 200])
    sent: list[str] = []

    def collector(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        if request.method == "POST":
            return httpx.Response(503, json={"error": {"code": "STORE_UNAVAILABLE"}})
        status = next(answers)
        if status != 200:
            return httpx.Response(status, text="<html>bad gateway</html>")
        body = {"id": "prompt_1", "name": "greet", "version": 1}
        return httpx.Response(200, json={"data": body})

    http = httpx.Client(transport=httpx.MockTransport(collector))
    with http, promptrail.Client(DEFAULT_KEY, "http://collector", http_client=http) as client:
        assert client.prompts.get("greet").name == "greet"
        with pytest.raises(promptrail.PromptrailError) as caught:
            client.requests.log(output="x")

    assert sent == ["GET", "GET", "GET", "POST"]
    assert (caught.value.status, caught.value.code) == (503, "STORE_UNAVAILABLE")


def test_an_answer_that_is_not_the_collector_is_a_clear_error() -> None:
    def not_a_collector(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>")

    http = httpx.Client(transport=httpx.MockTransport(not_a_collector))
    with (
        http,
        promptrail.Client(DEFAULT_KEY, "http://elsewhere", http_client=http) as client,
        pytest.raises(promptrail.PromptrailError) as caught,
    ):
        client.prompts.get("greet")

    assert caught.value.code == "INVALID_RESPONSE"


def test_the_key_is_sent_as_a_bearer_token() -> None:
    headers: list[httpx.Headers] = []

    def collector(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers)
        return httpx.Response(200, json={"data": [], "pagination": {"has_more": False}})

    http = httpx.Client(transport=httpx.MockTransport(collector))
    with http, promptrail.Client("pr-k", "http://collector", http_client=http) as client:
        assert list(client.prompts.list()) == []

    assert headers[0]["authorization"] == "Bearer pr-k"
    assert headers[0]["user-agent"].startswith("promptrail-python/")


# -- the public surface ------------------------------------------------------------------------

REST_NAMES = [
    "Client",
    "AsyncClient",
    "PromptTemplate",
    "RunStream",
    "AsyncRunStream",
    "PromptrailError",
    "ValidationError",
    "AuthenticationError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "ProviderError",
    "APIConnectionError",
    "APITimeoutError",
    "MissingVariablesError",
    "TemplateError",
    "Prompt",
    "PromptVersion",
    "PromptDiff",
    "PromptChange",
    "Environment",
    "Label",
    "TemplatePayload",
    "RunResult",
    "RequestLog",
    "RequestRecord",
    "SearchHit",
    "Export",
    "AnalyticsResult",
    "BatchResult",
]


def test_the_rest_client_is_exported_and_documented() -> None:
    assert set(REST_NAMES) <= set(promptrail.__all__)
    assert all(getattr(promptrail, name).__doc__ for name in REST_NAMES)
    assert issubclass(promptrail.APITimeoutError, promptrail.APIConnectionError)
    resources = [
        promptrail.Client,
        promptrail.AsyncClient,
        promptrail.PromptTemplate,
        Prompts,
        Requests,
        AsyncPrompts,
        AsyncRequests,
    ]
    for resource in resources:
        for name, member in vars(resource).items():
            if not name.startswith("_") and callable(member):
                assert member.__doc__, f"{resource.__name__}.{name} has no docstring"
