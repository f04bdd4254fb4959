"""Arbitrary JSON on ``POST /v1/playground/runs`` (and on ``/v1/playground/estimates``, which
takes the same body) is never a 5xx: each 4xx is the contract's error body, and nothing is
ever written to the registry. Bodies are built from valid ones with
fields replaced by odd values (NaN and Infinity literals, lone surrogates, NUL, integers past
64 bits, deep nesting)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from promptrail.testing import OpenAIStub
from tests.collector.playground.steps import PATH, prompt_versions
from tests.collector.runs.steps import create_prompt
from tests.fuzz_bodies import FUZZ, body_of, json_values, send, taken

ESTIMATES = "/v1/playground/estimates"
MORE = settings(FUZZ, max_examples=40)
VALUES = json_values("gpt-4o-mini", "pg_zz", numbers=(101,))
INLINE = {
    "type": "text",
    "template": "Hi {name}.",
    "model": "gpt-4o-mini",
    "parameters": {"max_tokens": 5},
}
STORED = {"name": "greet", "label": "production", "overrides": {"model": "gpt-4o-mini"}}
RUN = {
    "variables": {"name": "Ada"},
    "models": ["gpt-4o-mini"],
    "repetitions": 1,
    "max_cost_usd": 1.0,
    "stream": False,
}


BODIES = st.one_of(
    st.builds(
        lambda p, rest: {"prompt": p, **rest},
        body_of(INLINE, VALUES, objects_only=True),
        body_of(RUN, VALUES, objects_only=True),
    ),
    st.builds(
        lambda p, rest: {"prompt": p, **rest},
        body_of(STORED, VALUES, objects_only=True),
        body_of(RUN, VALUES, objects_only=True),
    ),
    st.builds(
        lambda rest, data: {"prompt": INLINE, **rest, "dataset": data},
        body_of({k: v for k, v in RUN.items() if k != "variables"}, VALUES, objects_only=True),
        body_of({"name": "people", "limit": 2}, VALUES, objects_only=True),
    ),
    VALUES,
)


def _stored(api: TestClient) -> None:
    """The prompt and dataset the bodies name (made once)."""
    if api.get("/v1/prompts/greet").status_code == 404:
        create_prompt(api)
        assert api.put("/v1/prompts/greet/labels/production", json={"version": 1}).is_success
        assert api.post("/v1/datasets", json={"name": "people"}).is_success
        items = [{"input_variables": {"name": n}} for n in ("Ada", "Bo", "Cy")]
        assert api.post("/v1/datasets/people/items", json={"items": items}).is_success


@MORE
@given(body=BODIES)
def test_playground_run(runs_api: TestClient, openai_stub: OpenAIStub, body: Any) -> None:
    _stored(runs_api)
    taken(send(runs_api, "POST", PATH, body))
    assert prompt_versions(runs_api, "greet") == [1]
    assert runs_api.get("/v1/prompts").json()["pagination"]["total"] == 1


@MORE
@given(body=BODIES)
def test_playground_estimate(runs_api: TestClient, openai_stub: OpenAIStub, body: Any) -> None:
    _stored(runs_api)
    taken(send(runs_api, "POST", ESTIMATES, body))
    # An estimate calls nothing and writes nothing.
    assert openai_stub.calls == []
    assert prompt_versions(runs_api, "greet") == [1]
