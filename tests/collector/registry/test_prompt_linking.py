"""Records that name no prompt are linked to the chat version their messages match
(docs/api-notes.md, Chat prompts: "Linking records that name no prompt"): over the JSON batch
route and OTLP, on the real store, so they count in the per-version analytics."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptrail._mustache import render_mustache
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import PromptStore
from tests.keys import DEFAULT_AUTH

SUPPORT = [
    {"role": "system", "content": "You are {{company}}'s support agent. Be {{tone}}."},
    {"role": "user", "content": "{{question}}"},
]
SUPPORT_V2 = [
    {"role": "system", "content": "You are {{company}}'s helper.{{#vip}} A VIP asks.{{/vip}}"},
    {"role": "user", "content": [{"type": "text", "text": "Question: {{question}}"}]},
]
WITH_HISTORY = [
    {"role": "system", "content": "Travel desk for {{city}}."},
    {"type": "placeholder", "name": "history"},
    {"role": "user", "content": "{{question}}"},
]


def asked(
    company: str = "Acme", tone: str = "brief", question: str = "Where is my order?"
) -> list[dict[str, Any]]:
    """The messages an app sends after rendering SUPPORT by hand."""
    return [
        {"role": "system", "content": f"You are {company}'s support agent. Be {tone}."},
        {"role": "user", "content": question},
    ]


def create(api: TestClient, name: str, messages: list[dict[str, Any]]) -> None:
    response = api.post(
        "/v1/prompts", json={"name": name, "type": "chat", "messages": messages, "model": "gpt-4o"}
    )
    assert response.status_code == 201, response.text


def patch(api: TestClient, name: str, **fields: Any) -> int:
    response = api.patch(f"/v1/prompts/{name}", json=fields)
    assert response.status_code == 200, response.text
    version: int = response.json()["data"]["version"]
    return version


def log(api: TestClient, *records: dict[str, Any]) -> list[str]:
    """Log records in one batch; return their ids (given here, so each can be read back)."""
    ids = [f"req_link_{uuid.uuid4().hex}" for _ in records]
    response = api.post(
        "/v1/requests/batch",
        json={"records": [{"id": i, **r} for i, r in zip(ids, records, strict=True)]},
    )
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data == {"accepted": len(records), "rejected": []}, data
    return ids


def stored(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()["data"]
    return record


def record(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": messages, "output": "ok", **fields}


# What a record that names no prompt reads back with: no name, no version, no link.
UNLINKED = ("", None, None)


def link_of(data: dict[str, Any]) -> tuple[str, int, Any]:
    return data["prompt_name"], data["version"], data["metadata"].get("prompt_link")


def test_a_batch_record_matching_a_chat_version_is_linked_with_its_variables(
    api: TestClient,
) -> None:
    create(api, "support", SUPPORT)
    assert patch(api, "support", messages=SUPPORT_V2) == 2
    v2 = [
        {"role": "system", "content": "You are Initech's helper. A VIP asks."},
        {"role": "user", "content": [{"type": "text", "text": "Question: refund?"}]},
    ]
    given = {"company": "Acme", "tone": "x", "question": "y"}

    first, second, kept = log(
        api,
        record(asked(), metadata={"team": "web"}),
        record(v2),
        record(asked(), input_variables=given),
    )

    one = stored(api, first)
    assert link_of(one) == ("support", 1, "matched")
    assert one["metadata"]["team"] == "web"
    # The text each plain variable stood for fills input_variables when the record had none.
    assert one["input_variables"] == {
        "company": "Acme",
        "tone": "brief",
        "question": "Where is my order?",
    }
    two = stored(api, second)
    assert link_of(two) == ("support", 2, "matched")
    assert two["input_variables"] == {"company": "Initech", "question": "refund?"}
    assert stored(api, kept)["input_variables"] == given


def test_an_anthropic_call_with_its_system_apart_is_linked(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    system, question = asked(company="Initech")
    anthropic_input = {
        "system": system["content"],
        "messages": [{"role": "user", "content": [{"type": "text", "text": question["content"]}]}],
    }

    (request_id,) = log(api, record([]) | {"input": anthropic_input})

    data = stored(api, request_id)
    assert link_of(data) == ("support", 1, "matched")
    assert data["input_variables"]["company"] == "Initech"


EVERY_FEATURE = [
    {
        "role": "system",
        "content": "Hello {{user.name}}!\n{{#items}}\n- {{.}}\n{{/items}}\n{{^items}}\n"
        "Nothing listed.\n{{/items}}\n{{! a note }}Tone: {{{tone}}}.",
    },
    {"type": "placeholder", "name": "history"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "{{question}}"},
            {"type": "image_url", "image_url": {"url": "https://img.test/{{image}}.png"}},
        ],
    },
]


@pytest.mark.parametrize("items", [["tea", "cake"], []])
def test_messages_rendered_by_the_collectors_renderer_are_linked(
    api: TestClient, items: list[str]
) -> None:
    """Dotted names, sections over a list, inverted sections, standalone tag lines, comments,
    triple mustaches and image URLs: what the renderer makes of them is matched."""
    create(api, "features", EVERY_FEATURE)
    values: dict[str, Any] = {"user": {"name": "Ann"}, "items": items, "tone": "<warm>"}
    values |= {"question": "Why?", "image": "cat"}
    system = render_mustache(str(EVERY_FEATURE[0]["content"]), values)
    user = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Why?"},
            {"type": "image_url", "image_url": {"url": "https://img.test/cat.png"}},
        ],
    }

    (request_id,) = log(api, record([{"role": "system", "content": system}, user]))

    data = stored(api, request_id)
    assert link_of(data) == ("features", 1, "matched")
    assert data["input_variables"] == {"tone": "<warm>", "question": "Why?", "image": "cat"}


def test_a_literal_difference_or_another_role_is_not_linked(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    changed = asked()
    changed[0]["content"] = changed[0]["content"].replace("Be brief.", "Be brief!")
    other_role = asked()
    other_role[1]["role"] = "assistant"
    one_more = [*asked(), {"role": "user", "content": "and?"}]

    for request_id in log(api, record(changed), record(other_role), record(one_more)):
        data = stored(api, request_id)
        assert link_of(data) == UNLINKED, data


def test_another_projects_prompt_is_never_matched(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    other_key: str = api.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    other = TestClient(api.app, headers={"X-API-Key": other_key})

    (request_id,) = log(other, record(asked()))

    assert link_of(stored(other, request_id)) == UNLINKED


def test_a_record_that_names_a_prompt_is_untouched(api: TestClient) -> None:
    create(api, "support", SUPPORT)

    (request_id,) = log(api, record(asked(), prompt_name="mine", version=3))

    data = stored(api, request_id)
    assert link_of(data) == ("mine", 3, None)
    assert data["input_variables"] == {}


def test_a_placeholder_matches_any_history(api: TestClient) -> None:
    create(api, "travel", WITH_HISTORY)
    system = {"role": "system", "content": "Travel desk for Lisbon."}
    question = {"role": "user", "content": "Any trams?"}
    history = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! Where to?"},
    ]

    long, short, wrong = log(
        api,
        record([system, *history, question]),
        record([system, question]),
        record([system, *history]),  # ends with an assistant message: no last user message
    )

    assert link_of(stored(api, long)) == ("travel", 1, "matched")
    assert stored(api, long)["input_variables"] == {"city": "Lisbon", "question": "Any trams?"}
    assert link_of(stored(api, short)) == ("travel", 1, "matched")
    assert link_of(stored(api, wrong)) == UNLINKED


def test_the_newest_matching_version_wins_across_versions_and_prompts(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    assert patch(api, "support", model="gpt-4o-mini") == 2  # same messages, a newer version
    (first,) = log(api, record(asked()))
    assert link_of(stored(api, first)) == ("support", 2, "matched")

    create(api, "support-copy", SUPPORT)  # created later: its version 1 is the newest
    (second,) = log(api, record(asked()))
    assert link_of(stored(api, second)) == ("support-copy", 1, "matched")

    api.delete("/v1/prompts/support-copy").raise_for_status()
    (third,) = log(api, record(asked()))
    assert link_of(stored(api, third)) == ("support", 2, "matched")


def test_a_version_made_after_the_project_was_read_is_matched_at_once(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    v2 = [
        {"role": "system", "content": "You are Acme's helper."},
        {"role": "user", "content": [{"type": "text", "text": "Question: hours?"}]},
    ]
    (before,) = log(api, record(v2))  # the project's chat versions are read here
    assert link_of(stored(api, before)) == UNLINKED

    patch(api, "support", messages=SUPPORT_V2)
    (after,) = log(api, record(v2))
    assert link_of(stored(api, after)) == ("support", 2, "matched")

    # A rollback makes version 3 with version 1's messages: the newest match for those.
    response = api.post("/v1/prompts/support/rollback", json={"version": 1})
    assert response.status_code in (200, 201), response.text
    (rolled,) = log(api, record(asked()))
    assert link_of(stored(api, rolled)) == ("support", 3, "matched")


def test_records_are_stored_unlinked_when_the_chat_versions_cannot_be_read(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*_: Any) -> None:
        raise ConnectionError("store away")

    # The registry's read fails (a store away) from the start, so the collector's warm-up
    # read at start fails as well; the request log's insert still works.
    monkeypatch.setattr(PromptStore, "changes", unreadable)
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        create(api, "support", SUPPORT)
        (request_id,) = log(api, record(asked()))
        assert link_of(stored(api, request_id)) == UNLINKED

        monkeypatch.undo()
        (later,) = log(api, record(asked()))
        assert link_of(stored(api, later)) == ("support", 1, "matched")


def test_linked_records_count_in_the_per_version_analytics(api: TestClient) -> None:
    create(api, "support", SUPPORT)
    patch(api, "support", messages=SUPPORT_V2)
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    log(
        api,
        record(asked(), usage=usage),
        record(asked(question="Hours?"), usage=usage),
        record(asked(tone="kind!"), usage=usage),
        record([{"role": "user", "content": "unrelated"}], usage=usage),
    )

    response = api.get(
        "/v1/requests/analytics",
        params={"metric": "usage", "group_by": "version", "prompt_name": "support"},
    )

    assert response.status_code == 200, response.text
    groups = [(g["name"], g["count"]) for g in response.json()["data"]["groups"]]
    assert groups == [("1", 3)]


def _otlp_attributes(shape: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    """A model call's attributes as another SDK exports them, in one of three conventions."""
    if shape == "gen_ai.input.messages":
        parts = [
            {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
            for m in messages
        ]
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(parts),
        }
    if shape == "gen_ai.prompt.N":
        indexed = {f"gen_ai.prompt.{i}.{key}": m[key] for i, m in enumerate(messages) for key in m}
        return {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", **indexed}
    indexed = {
        f"llm.input_messages.{i}.message.{key}": m[key] for i, m in enumerate(messages) for key in m
    }
    return {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", **indexed}


@pytest.mark.parametrize(
    "shape", ["gen_ai.input.messages", "gen_ai.prompt.N", "llm.input_messages"]
)
def test_an_otlp_span_with_messages_is_linked(api: TestClient, shape: str) -> None:
    create(api, "support", SUPPORT)
    finished = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    with provider.get_tracer("another-sdk").start_as_current_span("chat gpt-4o") as span:
        span.set_attributes(_otlp_attributes(shape, asked(company="Globex")))
    body = encode_spans(finished.get_finished_spans()).SerializeToString()

    response = api.post(
        "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
    )

    assert response.status_code == 200, response.text
    (item,) = api.get("/v1/requests", params={"prompt_name": "support"}).json()["data"]
    data = stored(api, item["id"])
    assert link_of(data) == ("support", 1, "matched")
    assert data["input_variables"]["company"] == "Globex"


# -- across collectors on a server store ------------------------------------------------------


class _ServerStore(Store):
    """A store client that reports a ClickHouse server: its collector polls the registry."""

    @property
    def is_embedded(self) -> bool:
        return False


@pytest.fixture
def collectors(settings: Settings) -> Iterator[tuple[Services, Services]]:
    """A (embedded-wired, writes) and B (server-wired, polled by hand) on one database."""
    built = []
    for server in (False, True):
        store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
        if server:
            store.__class__ = _ServerStore
        built.append(
            Services.build(settings.model_copy(update={"registry_poll_seconds": 3600}), store)
        )
    yield built[0], built[1]
    for services in built:
        services.close()


@pytest.mark.parametrize("b_reads_the_prompt", [False, True])
def test_a_version_written_on_another_collector_links_after_the_poll(
    collectors: tuple[Services, Services], b_reads_the_prompt: bool
) -> None:
    """B's poll brings A's new version to its linking, whether or not B's live-id index holds
    the project (the poll then reads for both at once)."""
    a, b = collectors
    a.prompts.create("default", PromptCreate.model_validate(
        {"name": "support", "type": "chat", "messages": SUPPORT, "model": "gpt-4o"}
    ))  # fmt: skip
    v2 = [
        {"role": "system", "content": "You are Acme's helper."},
        {"role": "user", "content": [{"type": "text", "text": "Question: hours?"}]},
    ]

    def linked(services: Services, messages: list[dict[str, Any]]) -> tuple[str, int]:
        outcome = services.ingest.log_batch("default", [record(messages)])
        row = services.requests.get("default", outcome.rows[0])
        return row.prompt_name, row.version

    assert linked(b, asked()) == ("support", 1)  # B reads the project's versions here
    if b_reads_the_prompt:
        assert b.prompts.resolve_version("default", "support").version == 1
        assert b.prompts.live_ids.indexed("default")
    a.prompts.update("default", "support", PromptUpdate.model_validate({"messages": SUPPORT_V2}))
    assert linked(b, v2) == ("", 0)  # B has not polled since A's write

    b.prompts.poll()

    assert linked(b, v2) == ("support", 2)
    if b_reads_the_prompt:
        assert b.prompts.resolve_version("default", "support").version == 2
