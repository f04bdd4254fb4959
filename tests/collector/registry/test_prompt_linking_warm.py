"""A collector reads the chat versions it links unnamed records to at start, before it
serves, so the first batch after a start does not wait for that read (docs/api-notes.md,
Chat prompts: "Linking records that name no prompt"); on a live collector over the real store.

The store's read of the registry (``PromptStore.changes``) is wrapped by :class:`ReadHook`,
which the tests can hold back or refuse."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from promptrail._mustache import render_mustache
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.models.prompts import PromptCreate
from promptrail.collector.services.container import Services
from promptrail.collector.services.prompts.matching_index import ProjectVersions
from promptrail.collector.services.prompts.matching_patterns import (
    compile_version,
    filing_key,
    record_messages,
)
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import PromptStore, PromptVersionRow, RegistryChanges
from promptrail.testing import serve
from tests.keys import DEFAULT_AUTH

SUPPORT = [
    {"role": "system", "content": "You are {{company}}'s support agent. Be {{tone}}."},
    {"role": "user", "content": "{{question}}"},
]
BILLING = [
    {"role": "system", "content": "Billing desk of {{company}}."},
    {"role": "user", "content": "{{question}}"},
]
# Long enough to wait for a server or a thread that should answer at once: a guard against a
# hang, never a measure of time.
_PATIENCE = 120.0


class ReadHook:
    """Wraps the registry's read: counts the reads, holds them at ``gate`` (after reading, so
    what is written meanwhile is missed by the read) and refuses them once ``refuse`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        self.started = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.refuse = False
        real = PromptStore.changes

        def changes(store: PromptStore, projects: Any, since: datetime) -> RegistryChanges:
            if self.refuse:
                raise ConnectionError("the registry's read was refused by the test")
            self.reads += 1
            found = real(store, projects, since)
            self.started.set()
            assert self.gate.wait(_PATIENCE), "the test never let the read go on"
            return found

        monkeypatch.setattr(PromptStore, "changes", changes)


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> ReadHook:
    return ReadHook(monkeypatch)


def create(client: httpx.Client, name: str, messages: list[dict[str, Any]]) -> None:
    body = {"name": name, "type": "chat", "messages": messages, "model": "gpt-4o"}
    response = client.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text


def asked(company: str = "Acme", question: str = "Where is my order?") -> list[dict[str, Any]]:
    """The messages an app sends after rendering SUPPORT by hand."""
    return [
        {"role": "system", "content": f"You are {company}'s support agent. Be brief."},
        {"role": "user", "content": question},
    ]


def log(client: httpx.Client, *records: dict[str, Any]) -> list[str]:
    """Log records in one batch; return their ids."""
    ids = [f"req_warm_{uuid.uuid4().hex}" for _ in records]
    body = {"records": [{"id": i, **r} for i, r in zip(ids, records, strict=True)]}
    response = client.post("/v1/requests/batch", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["data"] == {"accepted": len(records), "rejected": []}
    return ids


def link_of(client: httpx.Client, request_id: str) -> tuple[str, int | None, Any]:
    response = client.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data["prompt_name"], data["version"], data["metadata"].get("prompt_link")


def unnamed(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": messages, "output": "ok"}


@pytest.fixture
def with_versions(settings: Settings) -> Settings:
    """A database holding two chat prompts, written by a collector that has stopped since."""
    with (
        serve(create_app(settings)) as url,
        httpx.Client(base_url=url, headers=DEFAULT_AUTH, timeout=_PATIENCE) as client,
    ):
        create(client, "support", SUPPORT)
        create(client, "billing", BILLING)
    return settings


@contextmanager
def started(settings: Settings) -> Iterator[tuple[httpx.Client, Services]]:
    app = create_app(settings)
    with (
        serve(app) as url,
        httpx.Client(base_url=url, headers=DEFAULT_AUTH, timeout=_PATIENCE) as client,
    ):
        yield client, app.state.services


def test_the_first_batch_after_a_start_finds_the_versions_read(
    with_versions: Settings, hook: ReadHook
) -> None:
    with started(with_versions) as (client, services):
        # The versions were read at start, before any record asked for them.
        assert services.prompts.links.warmed.wait(_PATIENCE)
        assert hook.reads == 1
        # From now on a read of the registry fails: a batch that needed one would store its
        # records unlinked.
        hook.refuse = True

        first, second = log(client, unnamed(asked()), unnamed(BILLING_ASKED))

        assert link_of(client, first) == ("support", 1, "matched")
        assert link_of(client, second) == ("billing", 1, "matched")
        assert hook.reads == 1


BILLING_ASKED = [
    {"role": "system", "content": "Billing desk of Acme."},
    {"role": "user", "content": "Why was I charged twice?"},
]


@contextmanager
def built(settings: Settings) -> Iterator[Services]:
    """The collector's services on the store, not started (a test reads as the start does)."""
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    services = Services.build(settings, store)
    try:
        yield services
    finally:
        services.close()


def test_a_batch_during_the_start_read_is_linked_by_that_read(
    with_versions: Settings, hook: ReadHook
) -> None:
    """Records are linked before they are stored (a stored record is never written again):
    a batch that needs the versions while the start's read is held back is stored once that
    read ends, its records linked, and no second read is made; a batch whose records all name
    their prompt needs no versions and is stored at once."""
    hook.gate.clear()
    with built(with_versions) as services, ThreadPoolExecutor(2) as pool:
        links = services.prompts.links
        warming = pool.submit(links.warm, lambda: ["default"])
        assert hook.started.wait(_PATIENCE)  # the start's read is under way, held back

        named = {**unnamed(asked()), "prompt_name": "support", "version": 1}
        (named_id,) = services.ingest.log_batch("default", [named]).rows
        waiting = pool.submit(services.ingest.log_batch, "default", [unnamed(asked())])
        hook.gate.set()
        (unnamed_id,) = waiting.result(_PATIENCE).rows
        warming.result(_PATIENCE)

        row = services.requests.get("default", unnamed_id)
        assert (row.prompt_name, row.version) == ("support", 1)
        assert services.requests.get("default", named_id).prompt_name == "support"
        assert hook.reads == 1


def test_a_version_made_while_the_start_read_is_held_back_is_linked(
    with_versions: Settings, hook: ReadHook
) -> None:
    """The start's read has read the store but not finished when a new chat prompt is created:
    what the read missed is applied to what it read."""
    hook.gate.clear()
    with built(with_versions) as services, ThreadPoolExecutor(1) as pool:
        links = services.prompts.links
        warming = pool.submit(links.warm, lambda: ["default"])
        assert hook.started.wait(_PATIENCE)
        late = [{"role": "system", "content": "Shipping desk, {{carrier}}."}]
        services.prompts.create("default", PromptCreate.model_validate(
            {"name": "shipping", "type": "chat", "messages": late, "model": "gpt-4o"}
        ))  # fmt: skip
        hook.gate.set()
        warming.result(_PATIENCE)
        hook.refuse = True

        shipping = unnamed([{"role": "system", "content": "Shipping desk, UPS."}])
        (request_id,) = services.ingest.log_batch("default", [shipping]).rows

        row = services.requests.get("default", request_id)
        assert (row.prompt_name, row.version) == ("shipping", 1)
        assert hook.reads == 1


def test_a_batch_compiles_only_the_versions_its_records_could_match(
    with_versions: Settings,
) -> None:
    """Reading a project costs no compiling: a record is compared with the versions filed
    under its first message's role and leading text, compiled when first needed."""
    with built(with_versions) as services:  # not started: nothing read yet
        links = services.prompts.links
        assert links.compiled("default") is None
        outcome = services.ingest.log_batch("default", [unnamed(asked())])

        assert services.requests.get("default", outcome.rows[0]).prompt_name == "support"
        assert links.compiled("default") == 1  # support's version, not billing's


def _row(messages: list[dict[str, Any]]) -> PromptVersionRow:
    now = datetime.now(UTC)
    return PromptVersionRow(
        prompt_id="p1", version=1, version_id="v1", name="odd", description="", template="",
        model="gpt-4o", parameters={}, tags=[], folder="", note="", prompt_created_at=now,
        created_at=now, type="chat", messages=messages,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("first", "values"),
    [
        ("Hello {{name}}, welcome.", {"name": "Ann"}),
        ("Hello\n  {{#vip}}\nVIP\n  {{/vip}}\nbye {{name}}", {"vip": True, "name": "Bo"}),
        ("Hi {{! a note }}there {{name}}", {"name": "Cy"}),
        ("{{=<% %>=}}Dear <%name%>", {"name": "Di"}),
        ("No tags at all.  ", {}),
        ("{{{raw}}} first", {"raw": "<b>"}),
        ("\t {{#items}}- {{.}}\n{{/items}}", {"items": ["a", "b"]}),
    ],
)
def test_a_version_is_filed_where_its_rendered_records_are_looked_for(
    first: str, values: dict[str, Any]
) -> None:
    """A version is filed by the text before its first tag without being compiled: always
    where the records rendered from it are looked for (a prefix of what they begin with)."""
    messages = [{"role": "system", "content": first}, {"role": "user", "content": "{{q}}"}]
    row = _row(messages)
    compiled = compile_version(row)
    assert compiled is not None
    key, full = filing_key(row), compiled.key()
    assert key is not None and full is not None
    assert key[0] == full[0] and full[1].startswith(key[1])

    held = ProjectVersions()
    held.add([row])
    rendered = [
        {"role": "system", "content": render_mustache(first, values)},
        {"role": "user", "content": "a question"},
    ]
    messages_read = record_messages(rendered)
    assert messages_read is not None
    found = held.index.find(messages_read)
    assert found is not None
    assert (found[0].name, found[0].version, found[1]["q"]) == ("odd", 1, "a question")
