"""Trying an LLM judge before saving it (docs/api-notes.md, "Online evaluation"; issue 50
point 5): each record judged by the judge prompt's model through the credential order, each
call a priced record of ``promptrail-evaluation`` marked as a trial (no rule), nothing else
written; a failing or spent connection an item's error, never a 5xx. A live collector on a
socket, its runs going to the OpenAI wire stub."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from promptrail.testing import OpenAIStub
from tests.keys import DEFAULT_AUTH

GRADE = {"type": "llm_judge", "prompt": "grader", "name": "helpfulness"}


@pytest.fixture
def client(runs_url: str) -> Iterator[httpx.Client]:
    """An HTTP client of the live collector whose runs go to the stubs, as project default."""
    with httpx.Client(base_url=runs_url, headers=DEFAULT_AUTH, timeout=60) as http:
        yield http


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def _grader(client: httpx.Client, model: str = "gpt-4o-mini") -> None:
    _ok(
        client.post(
            "/v1/prompts",
            json={"name": "grader", "template": "Grade {output} from 1-5", "model": model},
        ),
        201,
    )


def _log(client: httpx.Client, ids: list[str]) -> None:
    records = [
        {
            "id": rid,
            "prompt_name": "greet",
            "model": "gpt-4o-mini",
            "status": "success",
            "input_variables": {"name": rid},
            "output": {"content": f"Hello {rid}"},
        }
        for rid in ids
    ]
    data = _ok(client.post("/v1/requests/batch", json={"records": records}), 201)
    assert data["rejected"] == []


def _connection(client: httpx.Client, stub: OpenAIStub, **fields: Any) -> None:
    body = {
        "name": "judges",
        "provider": "openai",
        "base_url": f"{stub.url}/v1",
        "api_key": "sk-judges-0000",
        **fields,
    }
    _ok(client.post("/v1/connections", json=body), 201)


def _try(client: httpx.Client, ids: list[str], evaluator: dict[str, Any] = GRADE) -> Any:
    return _ok(client.post("/v1/evaluators/try", json={"evaluator": evaluator, "request_ids": ids}))


def test_a_judge_is_tried_by_calling_its_model_each_call_a_priced_trial_record(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Score: 4"
    _grader(client)
    _log(client, ["req_t-1", "req_t-2"])
    items = _try(client, ["req_t-1", "req_missing", "req_t-2"])
    assert [i["request_id"] for i in items] == ["req_t-1", "req_missing", "req_t-2"]
    for item in (items[0], items[2]):
        assert item["value"] == 4 and item["error"] is None, item
        assert item["output"] == f"Hello {item['request_id']}"
        assert item["cost_usd"] > 0
        judge = _ok(client.get(f"/v1/requests/{item['judge_request_id']}"))
        assert judge["environment"] == "promptrail-evaluation"
        assert judge["kind"] == "llm"
        assert judge["metadata"] == {"judge_of": item["request_id"], "trial": True}
        assert judge["usage"]["estimated_cost_usd"] == item["cost_usd"]
        assert f"Hello {item['request_id']}" in str(judge["input"])
    # A record not in the project is an item's error, and is not judged.
    missing = items[1]
    assert missing["value"] is None and missing["error"] and missing["judge_request_id"] is None
    assert len(openai_stub.calls) == 2
    # Nothing but the judges' records was written: no evaluator, score or decision.
    assert _ok(client.get("/v1/evaluators")) == []
    for rid in ("req_t-1", "req_t-2"):
        detail = _ok(client.get(f"/v1/requests/{rid}"))
        assert detail["scores"] == [] and detail["evaluations"] == []
    listed = _ok(client.get("/v1/requests"))
    assert {r["id"] for r in listed} == {"req_t-1", "req_t-2"}


def test_a_reply_with_no_verdict_is_an_item_error_with_the_judge_s_record(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "I would rather not say."
    _grader(client)
    _log(client, ["req_n-1"])
    (item,) = _try(client, ["req_n-1"])
    assert item["value"] is None and "no category and no number" in item["error"]
    assert item["judge_request_id"] and item["cost_usd"] > 0


def test_a_refusing_connection_is_each_item_s_error_after_one_call(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    _connection(client, openai_stub)
    openai_stub.script.failures = [401] * 20
    _grader(client, model="judges/gpt-4o-mini")
    ids = [f"req_b-{n}" for n in range(5)]
    _log(client, ids)
    items = _try(client, ids)
    assert [i["error"] for i in items] == ["auth_invalid"] * 5
    assert all(i["value"] is None for i in items)
    # The route is tried by one call; the trial's other records are not sent after it failed.
    assert len(openai_stub.calls) == 1
    # A trial after the key is fixed calls again (the worker's back-off is not the trial's).
    openai_stub.script.failures = []
    openai_stub.script.reply = "5"
    assert [i["value"] for i in _try(client, ids[:2])] == [5, 5]


def test_a_connection_over_its_monthly_budget_is_budget_exceeded_without_a_call(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    _connection(client, openai_stub, monthly_budget_usd=0)
    _grader(client, model="judges/gpt-4o-mini")
    _log(client, ["req_s-1", "req_s-2"])
    items = _try(client, ["req_s-1", "req_s-2"])
    assert [i["error"] for i in items] == ["budget_exceeded"] * 2
    assert openai_stub.calls == []


def test_an_unreachable_connection_is_an_item_error(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    # A port nothing listens on (the discard port, closed on a test machine).
    _ok(
        client.post(
            "/v1/connections",
            json={
                "name": "gone",
                "provider": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key": "sk-gone-0000",
            },
        ),
        201,
    )
    _grader(client, model="gone/gpt-4o-mini")
    _log(client, ["req_u-1"])
    (item,) = _try(client, ["req_u-1"])
    assert item["error"] == "unreachable" and item["value"] is None


def test_a_judge_prompt_that_does_not_render_is_an_item_error_without_a_call(
    client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    _ok(
        client.post(
            "/v1/prompts",
            json={"name": "grader", "template": "Grade {answer}", "model": "gpt-4o-mini"},
        ),
        201,
    )
    _log(client, ["req_r-1"])
    (item,) = _try(client, ["req_r-1"])
    assert "input, output and expected_output" in item["error"]
    assert openai_stub.calls == []
    # A judge without its prompt is a bad evaluator: a 400 naming it.
    response = client.post(
        "/v1/evaluators/try",
        json={"evaluator": {"type": "llm_judge"}, "request_ids": ["req_r-1"]},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["field"] == "evaluator"
