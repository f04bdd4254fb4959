"""Issue 35 point 1: the registry's read routes answer from memory on the event loop, with the
body encoded once per version, byte for byte what the response model gives."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import httpx
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from promptrail.collector.api.routes import prompts as prompt_routes
from promptrail.collector.api.routes import templates as template_routes
from promptrail.collector.models.envelopes import Data
from promptrail.collector.models.prompts import PromptGetOut, TemplateOut
from promptrail.collector.services.container import Services
from promptrail.collector.services.templates import template_payload
from tests.keys import DEFAULT_AUTH

PROJECT = "default"


def services_of(api: TestClient) -> Services:
    services: Services = api.app.state.services  # type: ignore[attr-defined]
    return services


def make(api: TestClient, name: str, **fields: Any) -> None:
    body = {"name": name, "template": "Hi {who} ünï 日本", "model": "gpt-4o", **fields}
    assert api.post("/v1/prompts", json=body).status_code == 201


def test_read_routes_run_on_the_event_loop() -> None:
    # A plain ``def`` route runs on the thread pool, and FastAPI then validates its answer on
    # the pool too: two thread hops a read, for a version held in memory.
    for route in (
        prompt_routes.get_prompt,
        template_routes.latest_template,
        template_routes.version_template,
        template_routes.label_template,
    ):
        assert inspect.iscoroutinefunction(route), route.__name__


def test_read_bodies_are_the_response_models_json(api: TestClient) -> None:
    make(api, "r", parameters={"temperature": 0.25, "max_tokens": 7}, tags=["a"], folder="/f")
    assert api.put("/v1/prompts/r/labels/production", json={"version": 1}).status_code == 200
    row = services_of(api).prompts.resolve_version(PROJECT, "r")
    get_body = TypeAdapter(Data[PromptGetOut]).dump_json(Data(data=PromptGetOut.of_version(row)))
    template_body = TypeAdapter(TemplateOut).dump_json(template_payload(row))

    for _ in range(2):  # encoded the first time, kept the second
        got = api.get("/v1/prompts/r")
        assert got.headers["content-type"] == "application/json"
        assert got.content == get_body
        for path in ("template", "versions/1/template", "versions/by-label/production/template"):
            answer = api.get(f"/v1/prompts/r/{path}")
            assert answer.headers["content-type"] == "application/json"
            assert answer.content == template_body, path


def test_kept_bodies_follow_new_versions_and_label_moves(api: TestClient) -> None:
    make(api, "m")
    api.put("/v1/prompts/m/labels/production", json={"version": 1})
    assert api.get("/v1/prompts/m").json()["data"]["version"] == 1
    assert api.get("/v1/prompts/m/versions/by-label/production/template").json()["version"] == 1

    assert api.patch("/v1/prompts/m", json={"template": "v2 {x}"}).status_code == 200
    assert api.get("/v1/prompts/m").json()["data"]["template"] == "v2 {x}"
    assert api.get("/v1/prompts/m/template").json()["content"] == "v2 {{x}}"
    api.put("/v1/prompts/m/labels/production", json={"version": 2})
    assert api.get("/v1/prompts/m/versions/by-label/production/template").json()["version"] == 2


def test_missing_prompt_version_and_label_keep_their_errors(api: TestClient) -> None:
    make(api, "e")
    assert api.get("/v1/prompts/nope").json()["error"]["code"] == "PROMPT_NOT_FOUND"
    assert api.get("/v1/prompts/e/versions/9/template").json()["error"]["code"] == (
        "VERSION_NOT_FOUND"
    )
    assert api.get("/v1/prompts/e/versions/by-label/x/template").json()["error"]["code"] == (
        "LABEL_NOT_FOUND"
    )


def test_reads_on_the_event_loop_never_go_back_while_versions_are_written(live_url: str) -> None:
    # Over a real socket: a writer PATCHes while two readers fetch the prompt and its template
    # on their own connections. A read that starts after a PATCH was answered sees that
    # version or a newer one, never an older; each template body is its own version's.
    writes = 12
    acked = [1]
    done = threading.Event()
    problems: list[str] = []

    def read() -> None:
        with httpx.Client(base_url=live_url, headers=DEFAULT_AUTH, timeout=60) as client:
            while not done.is_set():
                floor = acked[-1]
                got = client.get("/v1/prompts/c").json()["data"]
                template = client.get("/v1/prompts/c/template").json()
                if got["version"] < floor or template["version"] < floor:
                    problems.append(f"read {got['version']}/{template['version']} after {floor}")
                if template["content"] != f"v{template['version']} {{{{x}}}}":
                    problems.append(f"body of {template['version']}: {template['content']}")

    with httpx.Client(base_url=live_url, headers=DEFAULT_AUTH, timeout=60) as client:
        created = client.post(
            "/v1/prompts", json={"name": "c", "template": "v1 {x}", "model": "gpt-4o"}
        )
        assert created.status_code == 201
        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for version in range(2, writes + 2):
                answer = client.patch("/v1/prompts/c", json={"template": f"v{version} {{x}}"})
                assert answer.status_code == 200, answer.text
                assert answer.json()["data"]["version"] == version
                acked.append(version)
                assert client.get("/v1/prompts/c").json()["data"]["version"] == version
        finally:
            done.set()
            for reader in readers:
                reader.join()
    assert problems == []
