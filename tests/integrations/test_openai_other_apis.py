"""The Responses API and embeddings, patched, against a wire-format stub of those endpoints."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from promptrail.testing import serve
from tests.capture import Records
from tests.integrations.openai_payloads import RESPONSE

EMBEDDINGS = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 0.125]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 3, "total_tokens": 3},
}


@pytest.fixture(scope="module")
def other_apis() -> Iterator[str]:
    async def responses(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse(RESPONSE)

    async def embeddings(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse(EMBEDDINGS)

    app = Starlette(
        routes=[
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
        ]
    )
    with serve(app, lifespan="off") as url:
        yield f"{url}/v1"


def test_responses_create_is_recorded(other_apis: str, records: Records) -> None:
    with openai.OpenAI(api_key="k", base_url=other_apis, max_retries=0) as api:
        response = api.responses.create(
            model="gpt-4o-mini", input="Greet the tester in French", instructions="Be brief."
        )

    (record,) = records()
    assert response.output_text == "Bonjour, tester."
    assert record["input"] == "Greet the tester in French"
    assert record["output"]["content"] == "Bonjour, tester."
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (9, 4)


def test_embeddings_create_is_recorded(other_apis: str, records: Records) -> None:
    with openai.OpenAI(api_key="k", base_url=other_apis, max_retries=0) as api:
        result = api.embeddings.create(
            model="text-embedding-3-small", input=["a", "b"], encoding_format="float"
        )

    (record,) = records()
    data: Any = result.data[0].embedding
    assert data == [0.25, -0.5, 0.125]
    assert record["input"] == ["a", "b"]
    assert record["model"] == "text-embedding-3-small"
    assert record["kind"] == "embedding"
    assert record["usage"]["prompt_tokens"] == 3
