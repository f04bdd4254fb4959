"""The error table: every failure answers ``{"error": {...}}`` with its code (docs/api-notes.md,
"Errors beyond the contract's table")."""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import zstandard
from fastapi.testclient import TestClient

from promptrail.collector.access.permissions import permission_for
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.collector.contract import assert_error
from tests.databases import ReusableDatabase, drop_database
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

PREFIXES = ("/v1", "/api/v1")
SMALL_LIMIT = 1024

# Routes that address one prompt; `{ref}` is the prompt name or id. With `greeting` for `{ref}`,
# each body succeeds for the prompt of the `greeting` fixture; the 404 table uses any `{ref}`.
PROMPT_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/prompts/{ref}", None),
    ("PATCH", "/prompts/{ref}", {"template": "Changed {name}"}),
    ("DELETE", "/prompts/{ref}", None),
    ("GET", "/prompts/{ref}/template", None),
    ("GET", "/prompts/{ref}/versions/1/template", None),
    ("GET", "/prompts/{ref}/versions/by-label/production/template", None),
    ("GET", "/prompts/{ref}/versions", None),
    ("GET", "/prompts/{ref}/versions/1", None),
    ("POST", "/prompts/{ref}/rollback", {"version": 1}),
    ("GET", "/prompts/{ref}/labels", None),
    ("PUT", "/prompts/{ref}/labels/production", {"version": 1}),
    ("DELETE", "/prompts/{ref}/labels/production", None),
    ("POST", "/prompts/{ref}/run", {"variables": {"name": "x"}}),
    ("POST", "/prompts/{ref}/versions/1/run", {"variables": {"name": "x"}}),
    ("POST", "/prompts/{ref}/versions/by-label/production/run", {"variables": {"name": "x"}}),
]

# Every /v1 route of the registry, with a body that would succeed for the `greeting` fixture's
# prompt (runs would need a provider, so they are left out).
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/prompts", {"name": "fresh", "template": "Hi {who}", "model": "gpt-4o"}),
    ("GET", "/prompts", None),
    *(
        (method, path.format(ref="greeting"), body)
        for method, path, body in PROMPT_ROUTES
        if not path.endswith("/run")
    ),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _ in ROUTES]

BAD_AUTH_HEADERS: list[dict[str, str | bytes]] = [
    {},
    {"Authorization": ""},
    {"X-API-Key": ""},
    {"Authorization": "Bearer pr-unknown-key"},
    {"X-API-Key": "pr-unknown-key"},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": "Basic cHItdGVzdC1kZWZhdWx0LWtleTo="},
    {"Authorization": DEFAULT_KEY},
    {"Authorization": f"Bearer {DEFAULT_KEY}-extra"},
    {"Authorization": f"Bearer {DEFAULT_KEY.upper()}"},
    {"X-API-Key": f"Bearer {DEFAULT_KEY}"},
    {"X-API-Key": b"\xff\xfe\x00"},
    {"Authorization": b"Bearer pr-\xc3\xa9\xff"},
    {"Authorization": "Bearer " + "k" * 10_000},
]


def create(api: TestClient, name: str, template: str = "Hello {name}", **fields: Any) -> Any:
    response = api.post(
        "/v1/prompts", json={"name": name, "template": template, "model": "gpt-4o", **fields}
    )
    assert response.status_code == 201, response.text
    return response.json()["data"]


def names(api: TestClient, **params: Any) -> list[str]:
    response = api.get("/v1/prompts", params=params)
    assert response.status_code == 200, response.text
    return [item["name"] for item in response.json()["data"]]


def version_numbers(api: TestClient, name: str) -> list[int]:
    response = api.get(f"/v1/prompts/{name}/versions")
    assert response.status_code == 200, response.text
    return [v["version"] for v in response.json()["data"]]


def labels(api: TestClient, name: str) -> dict[str, int]:
    response = api.get(f"/v1/prompts/{name}/labels")
    assert response.status_code == 200, response.text
    return {item["label"]: item["version"] for item in response.json()["data"]}


@pytest.fixture
def greeting(api: TestClient) -> Any:
    """A prompt at version 1 carrying the label ``production``."""
    return create(api, "greeting", labels=["production"])


@pytest.fixture
def anon(api: TestClient) -> TestClient:
    """A client on the same running app that sends no credentials at all."""
    return TestClient(api.app)


@pytest.fixture(scope="module")
def greeted(
    store_url: str, reusable_database: ReusableDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, TestClient]]:
    """One collector holding the ``greeting`` prompt, on a database of its own, for the tests
    that are only refused: a client with the key and one that sends none.

    Each such test checks that nothing it sent wrote anything, so they can share it; a
    collector and a prompt for each of the ~70 routes cost about 0.3 s a route.
    """
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=tmp_path_factory.mktemp("refused"),
        init_api_key=DEFAULT_KEY,
    )
    try:
        # A copy of the process's migrated template (~0.15 s of CPU), not migrated anew.
        reusable_database.make_migrated(settings.database)
        with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
            create(api, "greeting", labels=["production"])
            yield api, TestClient(api.app)
    finally:
        drop_database(store_url, settings.database)


@pytest.fixture
def small_api(settings: Settings) -> Iterator[TestClient]:
    """A collector whose request bodies are limited to SMALL_LIMIT bytes."""
    small = settings.model_copy(update={"max_body_bytes": SMALL_LIMIT})
    app = create_app(small)
    with TestClient(app, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}) as client:
        yield client


# -- 401 INVALID_API_KEY -------------------------------------------------------------------


def _every_v1_route() -> list[tuple[str, str]]:
    """Every (method, path) the app serves under /v1, with its path parameters filled in."""
    values = {
        "name": "greeting",
        "id": "greeting",
        "version": "1",
        "label": "production",
        "request_id": "req_" + "0" * 32,
        "export_id": "export_" + "0" * 32,
    }
    schema = create_app(Settings()).openapi()
    routes = []
    for path, operations in schema["paths"].items():
        if not path.startswith("/v1/"):
            continue
        filled = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), path)
        routes.extend((method.upper(), filled.removeprefix("/v1"), path) for method in operations)
    return sorted(routes)


def _keyless(method: str, template: str) -> bool:
    """A route the access table opens to callers without a key: the feedback route (its token
    is its credential, docs/api-notes.md "Scores and feedback") and sign-in's own routes."""
    permission = permission_for(method, template)
    return permission is not None and permission.access in ("public", "feedback_token")


# Built once: every worker collects this module, and each build of the app's OpenAPI document
# costs about half a second of CPU.
_V1_ROUTES = _every_v1_route()
KEYLESS = [(m, p) for m, p, template in _V1_ROUTES if _keyless(m, template)]
ALL_ROUTES = [(m, p) for m, p, template in _V1_ROUTES if not _keyless(m, template)]


def test_the_keyless_routes_are_feedback_and_sign_in_and_feedback_refuses_a_bad_token(
    anon: TestClient,
) -> None:
    assert {path for _, path in KEYLESS} - {"/feedback/x"} <= {
        "/auth/login",
        "/auth/logout",
        "/auth/me",
        "/auth/oidc/login",
        "/auth/oidc/callback",
    }
    assert ("POST", "/feedback/x") in KEYLESS
    for prefix in PREFIXES:
        for headers in BAD_AUTH_HEADERS:
            response = anon.post(f"{prefix}/feedback/x", json={"value": 1}, headers=headers)
            assert_error(response, 401, "INVALID_FEEDBACK_TOKEN", type_="authentication_error")


def test_the_route_table_covers_the_prompt_routes() -> None:
    assert {(m, p) for m, p, _ in ROUTES} <= set(ALL_ROUTES)


@pytest.mark.parametrize(("method", "path"), ALL_ROUTES, ids=[f"{m} {p}" for m, p in ALL_ROUTES])
def test_every_route_refuses_missing_unknown_and_malformed_keys(
    greeted: tuple[TestClient, TestClient], method: str, path: str
) -> None:
    api, anon = greeted
    bodies = {p: b for m, p, b in ROUTES if m == method}
    body = bodies.get(path, {} if method in ("POST", "PUT", "PATCH") else None)
    for prefix in PREFIXES:
        for headers in BAD_AUTH_HEADERS:
            response = anon.request(method, prefix + path, json=body, headers=headers)

            assert response.status_code == 401, (prefix, headers, response.text)
            assert_error(response, 401, "INVALID_API_KEY", type_="authentication_error")

    # None of the refused calls wrote anything.
    assert names(api) == ["greeting"]
    assert version_numbers(api, "greeting") == [1]
    assert labels(api, "greeting") == {"production": 1}


@pytest.mark.parametrize(("prefix", "header"), [("/v1", "bearer"), ("/api/v1", "x-api-key")])
@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=ROUTE_IDS)
def test_every_route_accepts_a_valid_key_in_either_header(
    anon: TestClient,
    greeting: Any,
    prefix: str,
    header: str,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    headers = (
        {"Authorization": f"Bearer {DEFAULT_KEY}"}
        if header == "bearer"
        else {"X-API-Key": DEFAULT_KEY}
    )

    response = anon.request(method, prefix + path, json=body, headers=headers)

    assert response.status_code in (200, 201), response.text
    assert "error" not in response.json()


def test_a_key_is_checked_before_the_body_is_parsed(anon: TestClient, api: TestClient) -> None:
    # A caller with a bad key learns that the key is wrong, not what the body lacks.
    for headers in ({}, {"Authorization": "Bearer pr-unknown-key"}):
        for body in (b"{not json", b'{"name": "x"}', b"\xff\xfe"):
            response = anon.post(
                "/v1/prompts",
                content=body,
                headers={**headers, "Content-Type": "application/json"},
            )

            assert_error(response, 401, "INVALID_API_KEY", type_="authentication_error")
    assert names(api) == []


# -- 404 -------------------------------------------------------------------------------------


def test_unknown_prompt_is_prompt_not_found_by_name_and_by_id(
    api: TestClient, greeting: Any
) -> None:
    for method, path, body in PROMPT_ROUTES:
        for ref in ("no-such-prompt", "prompt_" + "0" * 32, "prompt_" + "ab" * 16):
            response = api.request(method, "/v1" + path.format(ref=ref), json=body)

            assert response.status_code == 404, (method, path, response.text)
            details = assert_error(response, 404, "PROMPT_NOT_FOUND", type_="not_found_error")
            assert details["prompt_name"] == ref

    assert names(api) == ["greeting"]
    assert version_numbers(api, "greeting") == [1]
    assert labels(api, "greeting") == {"production": 1}


def test_a_deleted_prompt_is_prompt_not_found(api: TestClient, greeting: Any) -> None:
    assert api.delete("/v1/prompts/greeting").status_code == 200

    for method, path, body in PROMPT_ROUTES:
        for ref in ("greeting", greeting["id"]):
            response = api.request(method, "/v1" + path.format(ref=ref), json=body)

            assert response.status_code == 404, (method, path, response.text)
            details = assert_error(response, 404, "PROMPT_NOT_FOUND", type_="not_found_error")
            assert details["prompt_name"] == ref
    assert names(api) == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/prompts/greeting/versions/9", None),
        ("GET", "/v1/prompts/greeting/versions/9/template", None),
        ("GET", "/api/v1/prompts/greeting/versions/9", None),
        ("POST", "/v1/prompts/greeting/rollback", {"version": 9}),
        ("PUT", "/v1/prompts/greeting/labels/staging", {"version": 9}),
    ],
)
def test_unknown_version_is_version_not_found(
    api: TestClient, greeting: Any, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = api.request(method, path, json=body)

    details = assert_error(response, 404, "VERSION_NOT_FOUND", type_="not_found_error")
    assert details["prompt_name"] == "greeting"
    assert details["version"] == 9
    assert version_numbers(api, "greeting") == [1]
    assert labels(api, "greeting") == {"production": 1}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/prompts/greeting/versions/by-label/staging/template"),
        ("GET", "/api/v1/prompts/greeting/versions/by-label/staging/template"),
        ("DELETE", "/v1/prompts/greeting/labels/staging"),
    ],
)
def test_unknown_label_is_label_not_found(
    api: TestClient, greeting: Any, method: str, path: str
) -> None:
    response = api.request(method, path)

    details = assert_error(response, 404, "LABEL_NOT_FOUND", type_="not_found_error")
    assert details["prompt_name"] == "greeting"
    assert details["label"] == "staging"
    assert labels(api, "greeting") == {"production": 1}


def test_a_removed_label_is_label_not_found(api: TestClient, greeting: Any) -> None:
    assert api.delete("/v1/prompts/greeting/labels/production").status_code == 200

    for method, path in (
        ("GET", "/v1/prompts/greeting/versions/by-label/production/template"),
        ("DELETE", "/v1/prompts/greeting/labels/production"),
    ):
        response = api.request(method, path)

        assert_error(response, 404, "LABEL_NOT_FOUND", type_="not_found_error")


def test_unknown_route_is_404_with_the_error_body(api: TestClient, anon: TestClient) -> None:
    paths = ["/v1/nope", "/api/v1/nope", "/nope", "/v1/prompts/greeting/nope", "/v2/prompts"]
    for client in (api, anon):
        for path in paths:
            response = client.get(path)

            assert_error(response, 404, "NOT_FOUND", type_="not_found_error")


def test_wrong_method_is_405_with_the_error_body(api: TestClient, greeting: Any) -> None:
    cases = [
        ("PUT", "/v1/prompts", {"GET", "POST"}),
        ("DELETE", "/api/v1/prompts", {"GET", "POST"}),
        ("POST", "/v1/prompts/greeting/versions", {"GET"}),
        ("DELETE", "/v1/prompts/greeting/rollback", {"POST"}),
        ("PATCH", "/v1/prompts/greeting/labels", {"GET"}),
        ("POST", "/v1/prompts/greeting/template", {"GET"}),
    ]
    for method, path, allowed in cases:
        response = api.request(method, path, json={"version": 1})

        assert_error(response, 405, "METHOD_NOT_ALLOWED", type_="invalid_request_error")
        # RFC 9110: a 405 names the methods the resource does support.
        allow = {m.strip() for m in response.headers.get("allow", "").split(",") if m.strip()}
        assert allowed <= allow, (method, path, response.headers)

    assert names(api) == ["greeting"]
    assert version_numbers(api, "greeting") == [1]


# -- 409 -------------------------------------------------------------------------------------


def test_creating_a_taken_name_is_prompt_already_exists(api: TestClient, greeting: Any) -> None:
    response = api.post(
        "/v1/prompts", json={"name": "greeting", "template": "Other {x}", "model": "claude-3"}
    )

    details = assert_error(response, 409, "PROMPT_ALREADY_EXISTS", type_="conflict_error")
    assert details["prompt_name"] == "greeting"
    stored = api.get("/v1/prompts/greeting").json()["data"]
    assert stored["id"] == greeting["id"]
    assert stored["template"] == "Hello {name}"
    assert stored["model"] == "gpt-4o"
    assert version_numbers(api, "greeting") == [1]


def test_a_soft_deleted_name_is_free_again(api: TestClient, greeting: Any) -> None:
    assert api.delete("/v1/prompts/greeting").status_code == 200

    again = create(api, "greeting", template="Again {x}")

    assert again["id"] != greeting["id"]
    assert again["version"] == 1
    response = api.post(
        "/v1/prompts", json={"name": "greeting", "template": "Third", "model": "gpt-4o"}
    )
    assert_error(response, 409, "PROMPT_ALREADY_EXISTS", type_="conflict_error")


# -- 413 -------------------------------------------------------------------------------------


def _body_of_size(size: int, name: str = "sized") -> bytes:
    head = f'{{"name": "{name}", "template": "t", "model": "gpt-4o", "description": "'
    tail = '"}'
    padding = size - len(head) - len(tail)
    assert padding >= 0
    body = (head + "d" * padding + tail).encode()
    assert len(body) == size
    return body


def test_a_body_over_the_limit_is_payload_too_large(small_api: TestClient) -> None:
    response = small_api.post(
        "/v1/prompts",
        content=_body_of_size(SMALL_LIMIT + 1),
        headers={"Content-Type": "application/json"},
    )

    details = assert_error(response, 413, "PAYLOAD_TOO_LARGE", type_="validation_error")
    assert details["max_bytes"] == SMALL_LIMIT
    assert names(small_api) == []


def test_a_body_at_the_limit_is_accepted(small_api: TestClient) -> None:
    response = small_api.post(
        "/v1/prompts",
        content=_body_of_size(SMALL_LIMIT),
        headers={"Content-Type": "application/json"},
    )

    assert response.status_code == 201, response.text
    assert names(small_api) == ["sized"]


def test_an_oversized_patch_is_payload_too_large(small_api: TestClient) -> None:
    create(small_api, "sized")

    response = small_api.patch("/v1/prompts/sized", json={"template": "x" * (SMALL_LIMIT + 1)})

    assert_error(response, 413, "PAYLOAD_TOO_LARGE", type_="validation_error")
    assert version_numbers(small_api, "sized") == [1]


def post_chunked(api: TestClient, body: bytes, size: int) -> Any:
    """POST ``body`` to create a prompt in chunks of ``size`` bytes, with no Content-Length."""

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), size):
            yield body[start : start + size]

    response = api.post(
        "/v1/prompts", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    return response


def test_a_chunked_body_over_the_limit_is_payload_too_large(small_api: TestClient) -> None:
    body = _body_of_size(SMALL_LIMIT * 4)

    response = post_chunked(small_api, body, 100)

    details = assert_error(response, 413, "PAYLOAD_TOO_LARGE", type_="validation_error")
    assert details["max_bytes"] == SMALL_LIMIT
    assert names(small_api) == []


def test_a_chunked_body_under_the_limit_reaches_the_route_intact(small_api: TestClient) -> None:
    body = _body_of_size(SMALL_LIMIT - 10, name="chunked")

    response = post_chunked(small_api, body, 7)

    assert response.status_code == 201, response.text
    assert response.json()["data"]["description"] == json.loads(body)["description"]
    assert names(small_api) == ["chunked"]


def test_a_gzip_body_under_the_limit_is_accepted(small_api: TestClient) -> None:
    body = _body_of_size(SMALL_LIMIT - 1, name="zipped")

    response = small_api.post(
        "/v1/prompts",
        content=gzip.compress(body),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )

    assert response.status_code == 201, response.text
    assert response.json()["data"]["description"] == json.loads(body)["description"]
    assert names(small_api) == ["zipped"]


def _zstd_unsized(data: bytes) -> bytes:
    """A zstd frame that does not state its size, as a streaming compressor writes it."""
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(data) + compressor.flush()


def test_a_zstd_body_under_the_limit_is_accepted_in_every_frame_shape(
    small_api: TestClient,
) -> None:
    zstd = zstandard.ZstdCompressor()
    shapes = {
        "sized": lambda body: zstd.compress(body),
        "unsized": _zstd_unsized,
        # A body split over two frames is the two frames' contents joined.
        "frames": lambda body: zstd.compress(body[:100]) + _zstd_unsized(body[100:]),
    }
    for shape, pack in shapes.items():
        body = _body_of_size(SMALL_LIMIT - 1, name=shape)

        response = small_api.post(
            "/v1/prompts",
            content=pack(body),
            headers={"Content-Type": "application/json", "Content-Encoding": "zstd"},
        )

        assert response.status_code == 201, (shape, response.text)
        assert response.json()["data"]["description"] == json.loads(body)["description"]
    assert sorted(names(small_api)) == ["frames", "sized", "unsized"]


def _past_the_limit(coding: str) -> list[bytes]:
    """Small ``coding`` bodies that inflate past SMALL_LIMIT."""
    inflated = _body_of_size(SMALL_LIMIT * 50)
    if coding == "gzip":
        return [gzip.compress(inflated)]
    zstd = zstandard.ZstdCompressor()
    # Each frame alone fits, together they do not.
    half = _body_of_size(SMALL_LIMIT - 10)
    return [
        zstd.compress(inflated),
        _zstd_unsized(inflated),
        zstd.compress(half) + _zstd_unsized(half),
        # A bomb: a few hundred bytes that would inflate to 16 MiB.
        _zstd_unsized(b"d" * (16 << 20)),
    ]


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_body_that_inflates_past_the_limit_is_payload_too_large(
    small_api: TestClient, coding: str
) -> None:
    for packed in _past_the_limit(coding):
        assert len(packed) < SMALL_LIMIT  # refused for what it inflates to

        response = small_api.post(
            "/v1/prompts",
            content=packed,
            headers={"Content-Type": "application/json", "Content-Encoding": coding},
        )

        assert_error(response, 413, "PAYLOAD_TOO_LARGE", type_="validation_error")
    assert names(small_api) == []


def _not_what_it_claims(coding: str) -> list[bytes]:
    """Bodies that are not what a ``coding`` body claims to be."""
    plain = _body_of_size(100)
    if coding == "gzip":
        return [plain, b"\x1f\x8b\x08\x00garbage", gzip.compress(b"x" * 10)[:-4]]
    whole = zstandard.ZstdCompressor().compress(plain)
    return [
        plain,
        gzip.compress(plain),  # another coding
        whole[:-4],  # a cut frame
        _zstd_unsized(plain)[:-4],  # a cut frame that states no size
        whole + b"trailing bytes",  # a frame, then garbage
    ]


@pytest.mark.parametrize("coding", ["gzip", "ZSTD "])
def test_a_body_that_is_not_what_its_coding_claims_is_a_validation_error(
    small_api: TestClient, coding: str
) -> None:
    for raw in _not_what_it_claims(coding.strip().lower()):
        response = small_api.post(
            "/v1/prompts",
            content=raw,
            headers={"Content-Type": "application/json", "Content-Encoding": coding},
        )

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == "body", raw
    assert names(small_api) == []


def test_every_answer_names_the_codings_a_body_may_come_in(small_api: TestClient) -> None:
    # RFC 7694: the SDK posts zstd only to a collector that says it takes it.
    answers = [
        small_api.get("/v1/prompts"),
        small_api.post("/v1/prompts", json={"name": "coded", "template": "t", "model": "m"}),
        small_api.post("/v1/prompts", content=b"{not json"),
        small_api.post("/v1/prompts", content=_body_of_size(SMALL_LIMIT + 1)),
        small_api.get("/v1/no-such-route"),
    ]

    assert [answer.status_code for answer in answers] == [200, 201, 400, 413, 404]
    for answer in answers:
        assert answer.headers["accept-encoding"] == "gzip, zstd"


# -- 400 VALIDATION_ERROR --------------------------------------------------------------------


MALFORMED_JSON = [
    b"{not json",
    b"",
    b'{"name": }',
    b'{"name": "a", "template": "t", "model": "m",}',
    b"{'name': 'a'}",
    b'{"name": "a", "template": "t", "model": "m"} trailing',
    b'{"name": "a", "template": "t", "model": "m"',
    b"\x00",
]


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_malformed_json_is_validation_error_naming_the_body(
    api: TestClient, greeting: Any, method: str
) -> None:
    path = "/v1/prompts" if method == "POST" else "/v1/prompts/greeting"
    for raw in MALFORMED_JSON:
        response = api.request(
            method, path, content=raw, headers={"Content-Type": "application/json"}
        )

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == "body", raw

    assert names(api) == ["greeting"]
    assert version_numbers(api, "greeting") == [1]


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_a_body_that_is_not_utf8_is_validation_error_naming_the_body(
    api: TestClient, greeting: Any, method: str
) -> None:
    path = "/v1/prompts" if method == "POST" else "/v1/prompts/greeting"
    raw = b'{"name": "latin", "template": "caf\xe9 \xff", "model": "gpt-4o"}'

    response = api.request(method, path, content=raw, headers={"Content-Type": "application/json"})

    details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
    assert details["field"] == "body"
    assert names(api) == ["greeting"]
    assert version_numbers(api, "greeting") == [1]


WRONG_TYPES: list[tuple[str, Any]] = [
    ("name", 1),
    ("name", None),
    ("name", ["greeting"]),
    ("template", 42),
    ("template", None),
    ("template", {"text": "hi"}),
    ("model", False),
    ("description", 3.5),
    ("parameters", "temperature=1"),
    ("parameters", [0.5]),
    ("tags", "a,b"),
    ("tags", [1, 2]),
    ("folder", 7),
    ("labels", "production"),
]


def test_wrong_types_on_create_are_validation_errors_naming_the_field(api: TestClient) -> None:
    for field, value in WRONG_TYPES:
        body = {"name": "typed", "template": "Hello {name}", "model": "gpt-4o", field: value}

        response = api.post("/v1/prompts", json=body)

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == field or details["field"].startswith(field + "."), details
        assert field in response.json()["error"]["message"]

    assert names(api) == []


def test_wrong_types_on_patch_are_validation_errors_naming_the_field(
    api: TestClient, greeting: Any
) -> None:
    for field, value in WRONG_TYPES:
        if field == "name" or value is None:
            continue  # PATCH may name the prompt itself; null means "unchanged"
        response = api.patch("/v1/prompts/greeting", json={field: value})

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == field or details["field"].startswith(field + "."), details

    assert version_numbers(api, "greeting") == [1]


def test_a_missing_required_field_is_a_validation_error_naming_it(api: TestClient) -> None:
    for field in ("name", "template", "model"):
        body = {"name": "typed", "template": "Hello {name}", "model": "gpt-4o"}
        del body[field]

        response = api.post("/v1/prompts", json=body)

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == field

    assert names(api) == []


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_limit_out_of_range_is_a_validation_error_naming_limit(
    api: TestClient, prefix: str
) -> None:
    for limit in ("0", "101", "abc", "-1", "", "1.5", "1e2", "99999999999999999999"):
        response = api.get(f"{prefix}/prompts", params={"limit": limit})

        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == "limit", limit

    for limit in ("1", "100"):
        assert api.get(f"{prefix}/prompts", params={"limit": limit}).status_code == 200


# Each paged list: (cursor kind, path, extra query parameters).
PAGED_LISTS = [
    ("prompts", "/prompts", {}),
    ("requests", "/requests", {}),
    ("search", "/requests/search", {"query": "hello"}),
]


def _forged_cursor(settings: Settings, kind: str, raw: bytes) -> str:
    """A cursor that carries a valid signature over a payload the service never wrote.

    The default cursor secret is public (it ships in the source), so anyone can make one.
    """
    key = hashlib.sha256(f"{settings.cursor_secret}/{kind}".encode()).digest()
    mac = hmac.new(key, raw, hashlib.sha256).digest()[:12]
    return base64.urlsafe_b64encode(raw + mac).decode().rstrip("=")


def _assert_bad_cursor(api: TestClient, path: str, params: dict[str, str], cursor: str) -> None:
    for prefix in PREFIXES:
        response = api.get(f"{prefix}{path}", params={**params, "limit": 1, "cursor": cursor})

        assert response.status_code == 400, (path, cursor, response.text)
        details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
        assert details["field"] == "cursor", (path, cursor)


def test_a_cursor_the_service_did_not_issue_is_a_validation_error_naming_cursor(
    api: TestClient,
) -> None:
    create(api, "first")
    create(api, "second")
    page = api.get("/v1/prompts", params={"limit": 1}).json()
    issued = page["pagination"]["next_cursor"]
    assert page["pagination"]["has_more"] is True
    next_page = api.get("/v1/prompts", params={"limit": 1, "cursor": issued})
    assert next_page.status_code == 200, next_page.text
    seen = [p["name"] for p in page["data"] + next_page.json()["data"]]
    assert sorted(seen) == ["first", "second"]

    tampered = issued[:-2] + ("AA" if issued[-2:] != "AA" else "BB")
    bad = [
        "zzz",
        "a",
        "==",
        "not a cursor!",
        "%%%",
        tampered,
        issued + "x",
        "x" + issued,
        issued[::-1],
        base64.urlsafe_b64encode(b'{"at":"2020-01-01T00:00:00+00:00","id":"x"}').decode(),
    ]
    for _, path, params in PAGED_LISTS:
        for cursor in bad:
            _assert_bad_cursor(api, path, params, cursor)
    # A cursor is bound to the list that issued it.
    for _, path, params in PAGED_LISTS[1:]:
        _assert_bad_cursor(api, path, params, issued)


@pytest.mark.parametrize(
    ("kind", "path", "params"), PAGED_LISTS, ids=[k for k, _, _ in PAGED_LISTS]
)
def test_a_forged_cursor_with_a_bad_payload_is_a_validation_error_naming_cursor(
    api: TestClient, settings: Settings, kind: str, path: str, params: dict[str, str]
) -> None:
    create(api, "first")
    for raw in (
        b"[1, 2]",
        b'{"at": 5, "id": 1}',
        b'{"at": "yesterday", "id": "x"}',
        b'{"id": "x"}',
        b"{}",
        b"null",
        b"not json",
        b"\xff\xfe not utf-8",
    ):
        _assert_bad_cursor(api, path, params, _forged_cursor(settings, kind, raw))


# -- 400 INVALID_TEMPLATE --------------------------------------------------------------------

UNPARSEABLE_TEMPLATES = [
    "Hello {",
    "Hello }",
    "{",
    "}",
    "a } b { c",
    "{}",
    "{{name}",
    "{name}}",
    "{1abc}",
    "{ name }",
    "{first name}",
    "{name",
    "name}",
]


def test_an_unparseable_template_is_invalid_template_on_create(api: TestClient) -> None:
    for template in UNPARSEABLE_TEMPLATES:
        response = api.post(
            "/v1/prompts", json={"name": "broken", "template": template, "model": "gpt-4o"}
        )

        assert_error(response, 400, "INVALID_TEMPLATE", type_="validation_error")

    assert names(api) == []
    assert_error(api.get("/v1/prompts/broken"), 404, "PROMPT_NOT_FOUND", type_="not_found_error")


def test_an_unparseable_template_is_invalid_template_on_patch(
    api: TestClient, greeting: Any
) -> None:
    for template in UNPARSEABLE_TEMPLATES:
        response = api.patch("/v1/prompts/greeting", json={"template": template})

        assert_error(response, 400, "INVALID_TEMPLATE", type_="validation_error")

    assert version_numbers(api, "greeting") == [1]
    assert api.get("/v1/prompts/greeting").json()["data"]["template"] == "Hello {name}"


def test_escaped_braces_and_variables_are_valid_templates(api: TestClient) -> None:
    templates = ["{{", "}}", "{{ literal }}", "a {{b}} {c} d", "{_x1}", "{{{name}}}"]
    for index, template in enumerate(templates):
        response = api.post(
            "/v1/prompts", json={"name": f"fine{index}", "template": template, "model": "gpt-4o"}
        )

        assert response.status_code == 201, response.text
        assert response.json()["data"]["template"] == template
