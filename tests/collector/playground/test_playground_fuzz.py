"""Arbitrary JSON on ``POST /v1/playground/runs`` (and on ``/v1/playground/estimates``, which
takes the same body) is never a 5xx: each 4xx is the contract's error body, and nothing is
ever written to the registry. Bodies are built from valid ones with
fields replaced by odd values (NaN and Infinity literals, lone surrogates, NUL, integers past
64 bits, deep nesting)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from promptrail.testing import OpenAIStub
from tests.collector.playground.steps import PATH, prompt_versions
from tests.collector.runs.steps import create_prompt

ESTIMATES = "/v1/playground/estimates"

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "promptrail-hypothesis")
FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_DEEP = "\x00deep"
SCALAR = st.one_of(
    st.sampled_from(["\ud800", "\x00", "x" * 70_000, "", "gpt-4o-mini", "pg_zz", "a\nb"]),
    st.sampled_from([2**64, -(2**63) - 1, float("nan"), float("inf"), -1, 0, 1.5, True, 101]),
    st.just(_DEEP),
    st.none(),
    st.text(max_size=8),
)  # fmt: skip
JSON_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
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


def body_of(fields: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Bodies from valid ``fields``, each kept, replaced by anything or left out."""
    missing = object()
    return st.fixed_dictionaries(
        {
            key: st.one_of(st.just(value), JSON_VALUE, st.just(missing))
            for key, value in fields.items()
        },
        optional={"unexpected": JSON_VALUE},
    ).map(lambda body: {k: v for k, v in body.items() if v is not missing})


BODIES = st.one_of(
    st.builds(lambda p, rest: {"prompt": p, **rest}, body_of(INLINE), body_of(RUN)),
    st.builds(lambda p, rest: {"prompt": p, **rest}, body_of(STORED), body_of(RUN)),
    st.builds(
        lambda rest, data: {"prompt": INLINE, **rest, "dataset": data},
        body_of({k: v for k, v in RUN.items() if k != "variables"}),
        body_of({"name": "people", "limit": 2}),
    ),
    JSON_VALUE,
)


def send(api: TestClient, body: Any, path: str = PATH) -> Any:
    """Send ``body`` as JSON text written by hand (NaN a literal, the deep placeholder 3,000
    nested arrays)."""
    text = json.dumps(body, allow_nan=True).replace(json.dumps(_DEEP), "[" * 3000 + "]" * 3000)
    return api.request(
        "POST", path, content=text.encode(), headers={"content-type": "application/json"}
    )


def _stored(api: TestClient) -> None:
    """The prompt and dataset the bodies name (made once)."""
    if api.get("/v1/prompts/greet").status_code == 404:
        create_prompt(api)
        assert api.put("/v1/prompts/greet/labels/production", json={"version": 1}).is_success
        assert api.post("/v1/datasets", json={"name": "people"}).is_success
        items = [{"input_variables": {"name": n}} for n in ("Ada", "Bo", "Cy")]
        assert api.post("/v1/datasets/people/items", json={"items": items}).is_success


def _answered(response: Any) -> None:
    """A 2xx, or a 4xx with the contract's error body."""
    if response.status_code >= 300:
        assert 400 <= response.status_code < 500, response.text
        error = response.json()["error"]
        assert set(error) == {"type", "message", "code", "details"}, error


@FUZZ
@given(body=BODIES)
def test_playground_run(runs_api: TestClient, openai_stub: OpenAIStub, body: Any) -> None:
    _stored(runs_api)
    _answered(send(runs_api, body))
    assert prompt_versions(runs_api, "greet") == [1]
    assert runs_api.get("/v1/prompts").json()["pagination"]["total"] == 1


@FUZZ
@given(body=BODIES)
def test_playground_estimate(runs_api: TestClient, openai_stub: OpenAIStub, body: Any) -> None:
    _stored(runs_api)
    _answered(send(runs_api, body, ESTIMATES))
    # An estimate calls nothing and writes nothing.
    assert openai_stub.calls == []
    assert prompt_versions(runs_api, "greet") == [1]
