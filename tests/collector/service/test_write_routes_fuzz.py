"""Property: arbitrary JSON on every write route is never a 5xx, every 4xx is the contract's error
body (docs/api-notes.md, "Errors beyond the contract's table"), and a refused write stores nothing,
not even part of itself.

Values go where the models expect text, numbers, objects and lists: deep nesting, lone
surrogates, NUL, integers past 64 bits, NaN/Infinity literals, 1 MiB strings. Bodies are
written as JSON text by hand where Python's encoder cannot (NaN stays a literal, a surrogate
stays an escape, nesting past the encoder's recursion limit is spliced in).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from tests.collector.request_log.export_steps import finish
from tests.collector.request_log.otlp_payloads import json_export, json_span

# Bounded so the whole file stays well under a minute; derandomized so a failure reproduces.
# No example database, and Hypothesis' own caches go to the temp dir, not the repo.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "promptrail-hypothesis")
FUZZ = settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

MIB = 1 << 20
_DEEP = "\x00deep:"  # a placeholder string, replaced by nested arrays once the body is text

ODD_TEXT = st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "nul\x00byte", "x" * MIB, "é😀 \u202e", "", " ", "{x}", "'--"]
)
ODD_NUMBER = st.sampled_from(
    [2**64, -(2**63) - 1, 10**40, float("nan"), float("inf"), float("-inf"), -1, 0, 1.5, 2**31]
)
DEEP = st.sampled_from([50, 201, 3000]).map(lambda depth: f"{_DEEP}{depth}")
ORDINARY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
# The odd values are most of what is drawn: the examples are few.
SCALAR = st.one_of(ODD_TEXT, ODD_NUMBER, DEEP, ORDINARY)
JSON_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), ODD_TEXT), inner, max_size=3),
    ),
    max_leaves=6,
)


def body_text(body: Any) -> str:
    """JSON text of ``body``: NaN/Infinity as literals, surrogates as escapes, deep nesting."""
    text = json.dumps(body, allow_nan=True)
    while _DEEP_ESCAPED in text:
        start = text.index('"' + _DEEP_ESCAPED)
        end = text.index('"', start + 1)
        depth = int(text[start + 1 + len(_DEEP_ESCAPED) : end])
        text = text[:start] + "[" * depth + "]" * depth + text[end + 1 :]
    return text


_DEEP_ESCAPED = json.dumps(_DEEP)[1:-1]


def maybe(valid: Any) -> st.SearchStrategy[Any]:
    """The valid value half of the time, anything otherwise."""
    return st.one_of(st.just(valid), JSON_VALUE)


def body_of(fields: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Bodies built from valid ``fields``, each replaced by anything or left out."""
    missing = object()
    drawn = st.fixed_dictionaries(
        {key: st.one_of(maybe(value), st.just(missing)) for key, value in fields.items()},
        optional={"unexpected": JSON_VALUE},
    )
    return drawn.map(lambda body: {k: v for k, v in body.items() if v is not missing})


RECORD = {
    "prompt_name": "p",
    "model": "gpt-4o-mini",
    "provider": "openai",
    "status": "success",
    "input_variables": {"q": "hi"},
    "input": [{"role": "user", "content": "hi"}],
    "output": "hello",
    "metadata": {"team": "a"},
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    "latency_ms": 10,
    "error": None,
    "environment": "staging",
}
PROMPT = {
    "name": "fuzzed",
    "template": "Hi {name}",
    "model": "gpt-4o",
    "description": "d",
    "parameters": {"temperature": 0.5},
    "tags": ["t"],
    "folder": "/f",
    "labels": ["staging"],
}
CHAT_PROMPT = {
    "name": "fuzzed-chat",
    "type": "chat",
    "messages": [
        {"role": "system", "content": "You help {{user.name}}{{#vip}}, a VIP{{/vip}}."},
        {"type": "placeholder", "name": "history"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "{{question}}"},
                {"type": "image_url", "image_url": {"url": "{{image}}", "detail": "low"}},
            ],
        },
    ],
    "model": "gpt-4o",
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
    },
    "variables_schema": {"type": "object", "properties": {"question": {"type": "string"}}},
    "config": {"team": "a"},
    "labels": ["staging"],
}
SPAN_ATTRIBUTES = [
    {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
    {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "5"}},
]


@st.composite
def otlp_export(draw: st.DrawFn) -> Any:
    attributes = [
        {"key": item["key"], "value": draw(maybe(item["value"]))} for item in SPAN_ATTRIBUTES
    ]
    attributes.append({"key": "gen_ai.output.messages", "value": {"stringValue": draw(SCALAR)}})
    span = draw(body_of(json_span("00000000000000ab", attributes)))
    return draw(maybe(json_export([span])))


# -- what a refused write must leave as it was -----------------------------------------------


def record_ids(api: TestClient) -> set[str]:
    ids: set[str] = set()
    params: dict[str, Any] = {"limit": 100}
    while True:
        page = api.get("/v1/requests", params=params).json()
        ids.update(item["id"] for item in page["data"])
        cursor = page["pagination"].get("next_cursor")
        if not cursor:
            return ids
        params = {"limit": 100, "cursor": cursor}


def registry(api: TestClient) -> Any:
    names = sorted(item["name"] for item in api.get("/v1/prompts?limit=100").json()["data"])
    versions = [v["version"] for v in api.get("/v1/prompts/base/versions").json()["data"]]
    labels = api.get("/v1/prompts/base/labels").json()["data"]
    return names, versions, [(item["label"], item["version"]) for item in labels]


def assert_answer(response: Any, before: Any, after: Callable[[], Any]) -> None:
    """Never a 5xx; a 4xx has the contract's body and changed nothing."""
    assert response.status_code < 500, response.text[:2000]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"type", "message", "code", "details"}, error
        assert isinstance(error["message"], str) and error["message"], error
        assert isinstance(error["code"], str) and isinstance(error["details"], dict), error
        assert after() == before


@pytest.fixture
def base_prompt(api: TestClient) -> TestClient:
    response = api.post("/v1/prompts", json={**PROMPT, "name": "base", "labels": ["production"]})
    assert response.status_code == 201, response.text
    return api


def send(api: TestClient, method: str, path: str, body: Any) -> Any:
    return api.request(
        method, path, content=body_text(body), headers={"Content-Type": "application/json"}
    )


@FUZZ
@given(body=body_of(PROMPT))
def test_prompt_create(base_prompt: TestClient, body: dict[str, Any]) -> None:
    api = base_prompt
    before = registry(api)
    response = send(api, "POST", "/v1/prompts", body)
    assert_answer(response, before, lambda: registry(api))
    if response.status_code == 201:
        assert api.delete(f"/v1/prompts/{response.json()['data']['id']}").status_code == 200


@FUZZ
@given(body=body_of({k: v for k, v in PROMPT.items() if k != "name"}))
def test_prompt_patch(base_prompt: TestClient, body: dict[str, Any]) -> None:
    api = base_prompt
    before = registry(api)
    assert_answer(send(api, "PATCH", "/v1/prompts/base", body), before, lambda: registry(api))


@FUZZ
@given(body=body_of(CHAT_PROMPT))
def test_chat_prompt_create(base_prompt: TestClient, body: dict[str, Any]) -> None:
    api = base_prompt
    before = registry(api)
    response = send(api, "POST", "/v1/prompts", body)
    assert_answer(response, before, lambda: registry(api))
    if response.status_code == 201:
        assert api.delete(f"/v1/prompts/{response.json()['data']['id']}").status_code == 200


@FUZZ
@given(body=body_of({k: v for k, v in CHAT_PROMPT.items() if k not in ("name", "type")}))
def test_chat_prompt_patch(base_prompt: TestClient, body: dict[str, Any]) -> None:
    api = base_prompt
    created = api.post("/v1/prompts", json={**CHAT_PROMPT, "name": "chat-base"})
    assert created.status_code == 201, created.text
    before = registry(api), api.get("/v1/prompts/chat-base/versions").json()
    response = send(api, "PATCH", "/v1/prompts/chat-base", body)
    assert response.status_code < 500, response.text[:2000]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"type", "message", "code", "details"}, error
        after = registry(api), api.get("/v1/prompts/chat-base/versions").json()
        assert after == before
    assert api.delete("/v1/prompts/chat-base").status_code == 200


# The registry's inserts on the embedded store write rows as hand-escaped literals, not query
# parameters (docs/security.md, "SQL"): any text a client sends must come back exactly as sent.
LITERAL_TRAPS = ["'", "\\", "\\'", "\\\\'", "\x00", "\n", "\r\n", "\t", "?", "%s", "{x:String}",
                 "') , ('", "\\0", "\\N", "é😀\u202e", "`", '"']  # fmt: skip
REGISTRY_TEXT = st.lists(
    st.one_of(
        st.sampled_from(LITERAL_TRAPS),
        st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="{}"), max_size=8),
    ),
    min_size=1,
    max_size=8,
).map("".join)


@settings(FUZZ, max_examples=40)
@given(text=REGISTRY_TEXT)
def test_registry_text_round_trips(base_prompt: TestClient, text: str) -> None:
    api = base_prompt
    template = text.replace("{", "(").replace("}", ")")  # braces are the template's syntax
    tag = text.strip()[:64].strip()
    body = {"template": f"{template} {{name}}", "model": text[:200].strip() or "m",
            "description": text, "tags": [tag] if tag else []}  # fmt: skip
    response = api.patch("/v1/prompts/base", json=body)
    assert response.status_code == 200, response.text
    # The version list reads the table (the get is served from memory and would pass anyway);
    # it answers the template and the model, written by the same escaping as every text field.
    versions = api.get("/v1/prompts/base/versions", params={"limit": 100}).json()["data"]
    stored = max(versions, key=lambda version: version["version"])
    assert (stored["template"], stored["model"]) == (body["template"], body["model"])


@FUZZ
@given(body=body_of({"version": 1}), label=st.sampled_from(["beta", "latest", "x" * 65]))
def test_label_put(base_prompt: TestClient, body: dict[str, Any], label: str) -> None:
    api = base_prompt
    before = registry(api)
    response = send(api, "PUT", f"/v1/prompts/base/labels/{label}", body)
    assert_answer(response, before, lambda: registry(api))


@FUZZ
@given(body=st.one_of(body_of(RECORD), JSON_VALUE))
def test_request_log(api: TestClient, body: Any) -> None:
    before = record_ids(api)
    response = send(api, "POST", "/v1/requests", body)
    assert_answer(response, before, lambda: record_ids(api))
    if response.status_code == 201:
        assert record_ids(api) == before | {response.json()["data"]["id"]}


@FUZZ
@given(records=st.lists(st.one_of(body_of(RECORD), JSON_VALUE), max_size=3))
def test_request_batch(api: TestClient, records: list[Any]) -> None:
    before = record_ids(api)
    response = send(api, "POST", "/v1/requests/batch", {"records": records})
    assert_answer(response, before, lambda: record_ids(api))
    if response.status_code == 201:
        result = response.json()["data"]
        added = record_ids(api) - before
        assert len(added) == result["accepted"]
        assert result["accepted"] + len(result["rejected"]) == len(records)


@FUZZ
@given(export=otlp_export())
def test_otlp_json(api: TestClient, export: Any) -> None:
    before = record_ids(api)
    response = send(api, "POST", "/v1/traces", export)
    assert_answer(response, before, lambda: record_ids(api))
    if response.status_code == 200:
        assert len(record_ids(api) - before) <= 1


@FUZZ
@given(
    body=body_of(
        {
            "format": "json",
            "filters": {
                "prompt_name": "p",
                "start_date": "2026-01-01",
                "metadata": {"k": "v"},
                "score.helpful.min": 0.5,
                "unscored": "thumb",
            },
            "include_metadata": True,
        }
    )
)
def test_export_create(api: TestClient, body: dict[str, Any]) -> None:
    response = send(api, "POST", "/v1/requests/export", body)
    assert_answer(response, None, lambda: None)
    if response.status_code == 201:
        # An accepted export runs to the end: filters that pass validation always work.
        done = finish(api, response.json()["data"]["export_id"])
        assert done["status"] == "completed", done


@FUZZ
@given(body=st.one_of(body_of({"metadata": {"team": "nobody"}}), JSON_VALUE))
def test_request_delete(api: TestClient, body: Any) -> None:
    kept = {**RECORD, "id": "req_keep", "metadata": {"fuzz_owner": "keeper"}}
    assert api.post("/v1/requests", json=kept).status_code == 201
    before = record_ids(api)
    response = send(api, "DELETE", "/v1/requests", body)
    assert_answer(response, before, lambda: record_ids(api))
    if response.status_code == 200:
        assert record_ids(api) == before  # nothing generated names the kept record's metadata


# -- scores, configs and feedback (issue 31) -------------------------------------------------

SCORE = {
    "id": "score-fuzz",
    "request_id": "req_fuzz",
    "trace_id": "0af7651916cd43dd8448eb211c80319c",
    "name": "helpful",
    "data_type": "numeric",
    "value": 0.5,
    "comment": "c",
    "correction": "x",
    "source": "eval",
    "metadata": {"k": "v"},
    "created_at": "2026-01-01T00:00:00Z",
}


def scores_state(api: TestClient) -> Any:
    """Every score (id and value) and every config of the project."""
    scores: list[Any] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        page = api.get("/v1/scores", params=params).json()
        scores += [(item["id"], item["value"]) for item in page["data"]]
        cursor = page["pagination"].get("next_cursor")
        if not cursor:
            break
        params = {"limit": 100, "cursor": cursor}
    configs = api.get("/v1/score-configs").json()["data"]
    return sorted(scores, key=str), configs


@FUZZ
@given(body=st.one_of(body_of(SCORE), JSON_VALUE))
def test_score_create(api: TestClient, body: Any) -> None:
    before = scores_state(api)
    response = send(api, "POST", "/v1/scores", body)
    assert_answer(response, before, lambda: scores_state(api))


@FUZZ
@given(scores=st.lists(st.one_of(body_of(SCORE), JSON_VALUE), max_size=3))
def test_score_batch(api: TestClient, scores: list[Any]) -> None:
    before = scores_state(api)
    response = send(api, "POST", "/v1/scores/batch", {"scores": scores})
    assert_answer(response, before, lambda: scores_state(api))
    if response.status_code == 201:
        result = response.json()["data"]
        assert result["accepted"] + len(result["rejected"]) == len(scores)


@FUZZ
@given(
    body=body_of(
        {"data_type": "categorical", "min": 1, "max": 5, "categories": ["a"], "description": "d"}
    ),
    name=st.sampled_from(["stars", "x" * 101, "a.b"]),
)
def test_score_config_put(api: TestClient, body: dict[str, Any], name: str) -> None:
    before = scores_state(api)
    response = send(api, "PUT", f"/v1/score-configs/{name}", body)
    assert_answer(response, before, lambda: scores_state(api))


@FUZZ
@given(
    body=body_of(
        {
            "request_id": "req_fuzz",
            "name": "thumb",
            "data_type": "categorical",
            "categories": ["up", "down"],
            "ttl_seconds": 60,
        }
    )
)
def test_feedback_token_create(api: TestClient, body: dict[str, Any]) -> None:
    assert_answer(send(api, "POST", "/v1/scores/tokens", body), None, lambda: None)


@FUZZ
@given(body=st.one_of(body_of({"value": "up", "comment": "c", "correction": "x"}), JSON_VALUE))
def test_feedback_post(api: TestClient, body: Any) -> None:
    token = api.post(
        "/v1/scores/tokens",
        json={"request_id": "req_fuzz", "name": "thumb", "categories": ["up", "down"]},
    ).json()["data"]
    before = scores_state(api)
    browser = TestClient(api.app)  # no key: the token is the credential
    response = send(browser, "POST", token["url"], body)
    if response.status_code >= 400:
        assert_answer(response, before, lambda: scores_state(api))
    assert response.status_code < 500, response.text[:2000]
    assert response.headers["access-control-allow-origin"] == "*"


# -- datasets and experiments (issue 33) -----------------------------------------------------

ITEM = {"id": "item-1", "input_variables": {"q": "hi"}, "expected_output": "hello",
        "metadata": {"k": "v"}}  # fmt: skip
EXPERIMENT = {
    "name": "fuzzed",
    "dataset": "fuzzset",
    "task": "client",
    "evaluators": [{"type": "regex", "pattern": "h.llo"}],
    "repetitions": 2,
    "concurrency": 4,
    "metadata": {"k": "v"},
}
RESULT = {"item_id": "item-1", "repetition": 1, "output": "hello", "status": "success",
          "scores": {"ok": True}, "latency_ms": 5, "estimated_cost_usd": 0.1}  # fmt: skip


@pytest.fixture
def fuzzset(api: TestClient) -> str:
    """A dataset with one item, and an open client experiment over it; the experiment's id."""
    assert api.post("/v1/datasets", json={"name": "fuzzset"}).status_code == 201
    assert api.post("/v1/datasets/fuzzset/items", json={"items": [ITEM]}).status_code == 201
    made = api.post("/v1/experiments", json={"dataset": "fuzzset", "task": "client"})
    assert made.status_code == 201, made.text
    experiment_id: str = made.json()["data"]["id"]
    return experiment_id


def datasets_state(api: TestClient, experiment_id: str) -> Any:
    """The datasets, the items of ``fuzzset``, the experiments and one experiment's results."""
    datasets = sorted(d["name"] for d in api.get("/v1/datasets?limit=100").json()["data"])
    items = api.get("/v1/datasets/fuzzset/items?limit=100").json()["data"]
    experiments = sorted(e["id"] for e in api.get("/v1/experiments?limit=100").json()["data"])
    results = api.get(f"/v1/experiments/{experiment_id}/results?limit=100").json()["data"]
    return datasets, items, experiments, results


@FUZZ
@given(body=st.one_of(body_of({"name": "fuzz-2", "description": "d", "metadata": {}}), JSON_VALUE))
def test_dataset_create(api: TestClient, fuzzset: str, body: Any) -> None:
    before = datasets_state(api, fuzzset)
    response = send(api, "POST", "/v1/datasets", body)
    assert_answer(response, before, lambda: datasets_state(api, fuzzset))


@FUZZ
@given(items=st.lists(st.one_of(body_of(ITEM), JSON_VALUE), max_size=3))
def test_dataset_items(api: TestClient, fuzzset: str, items: list[Any]) -> None:
    before = datasets_state(api, fuzzset)
    response = send(api, "POST", "/v1/datasets/fuzzset/items", {"items": items})
    assert_answer(response, before, lambda: datasets_state(api, fuzzset))
    if response.status_code == 201:
        result = response.json()["data"]
        assert result["accepted"] + len(result["rejected"]) == len(items)


@FUZZ
@given(
    body=st.one_of(
        body_of(
            {
                "filters": {"prompt_name": "p", "metadata": {"team": "a"}, "score.x.min": 1},
                "limit": 10,
                "output_as_expected": True,
            }
        ),
        JSON_VALUE,
    )
)
def test_dataset_items_from_requests(api: TestClient, fuzzset: str, body: Any) -> None:
    before = datasets_state(api, fuzzset)
    response = send(api, "POST", "/v1/datasets/fuzzset/items/from-requests", body)
    assert_answer(response, before, lambda: datasets_state(api, fuzzset))


@FUZZ
@given(body=st.one_of(body_of(EXPERIMENT), JSON_VALUE))
def test_experiment_create(api: TestClient, fuzzset: str, body: Any) -> None:
    # No valid body names a prompt: nothing here may call a provider.
    before = datasets_state(api, fuzzset)
    response = send(api, "POST", "/v1/experiments", body)
    assert_answer(response, before, lambda: datasets_state(api, fuzzset))


@FUZZ
@given(results=st.lists(st.one_of(body_of(RESULT), JSON_VALUE), max_size=3))
def test_experiment_results(api: TestClient, fuzzset: str, results: list[Any]) -> None:
    before = datasets_state(api, fuzzset)
    response = send(api, "POST", f"/v1/experiments/{fuzzset}/results", {"results": results})
    assert_answer(response, before, lambda: datasets_state(api, fuzzset))
    if response.status_code == 201:
        result = response.json()["data"]
        assert result["accepted"] + len(result["rejected"]) == len(results)
