"""Arbitrary JSON on the connections' write routes is never a 5xx: each 4xx is the contract's
error body, and a refused write changes nothing. Bodies are built from valid ones with fields
replaced by odd values (NaN and Infinity literals, lone surrogates, NUL, integers past 64 bits,
deep nesting, link-local URLs)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "promptrail-hypothesis")
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_DEEP = "\x00deep"
SCALAR = st.one_of(
    st.sampled_from(
        ["\ud800", "\x00", "x" * 70_000, "", "http://169.254.169.254/", "http://[fe80::1]/",
         "ftp://x", "a\nb", "Authorization"]
    ),
    st.sampled_from([2**64, -(2**63) - 1, float("nan"), float("inf"), -1, 0, 1.5, True]),
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
CONNECTION = {
    "name": "fuzz",
    "provider": "openai_compatible",
    "api_key": "sk-fuzz-key-0001",
    "base_url": "http://127.0.0.1:9/v1",
    "models": ["llama"],
    "headers": {"X-A": "b"},
    "monthly_budget_usd": 5,
}


def body_of(fields: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Bodies from valid ``fields``, each kept, replaced by anything or left out; now and
    then a body that is no object at all."""
    missing = object()
    drawn = st.fixed_dictionaries(
        {
            key: st.one_of(st.just(value), JSON_VALUE, st.just(missing))
            for key, value in fields.items()
        },
        optional={"unexpected": JSON_VALUE},
    ).map(lambda body: {k: v for k, v in body.items() if v is not missing})
    return st.one_of(drawn, drawn, drawn, JSON_VALUE)


def send(api: TestClient, method: str, path: str, body: Any) -> Any:
    """Send ``body`` as JSON text written by hand (NaN a literal, the deep placeholder 3,000
    nested arrays)."""
    text = json.dumps(body, allow_nan=True).replace(json.dumps(_DEEP), "[" * 3000 + "]" * 3000)
    return api.request(
        method, path, content=text.encode(), headers={"content-type": "application/json"}
    )


def taken(response: Any) -> bool:
    """Whether the write was taken (2xx); else check it is a 4xx with the error body."""
    if response.status_code < 300:
        return True
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "code", "details"}, error
    return False


@FUZZ
@given(body=body_of(CONNECTION))
def test_connection_create(api: TestClient, body: Any) -> None:
    before = api.get("/v1/connections").json()["data"]
    if taken(send(api, "POST", "/v1/connections", body)):
        assert api.delete(f"/v1/connections/{body['name']}").status_code == 200
    else:
        assert api.get("/v1/connections").json()["data"] == before


@FUZZ
@given(body=body_of({k: v for k, v in CONNECTION.items() if k != "name"}))
def test_connection_patch(api: TestClient, body: Any) -> None:
    if api.get("/v1/connections/base").status_code == 404:
        made = api.post("/v1/connections", json={**CONNECTION, "name": "base"})
        assert made.status_code == 201, made.text
    before = api.get("/v1/connections/base").json()["data"]
    if not taken(send(api, "PATCH", "/v1/connections/base", body)):
        assert api.get("/v1/connections/base").json()["data"] == before
