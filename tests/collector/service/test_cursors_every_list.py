"""Every paged list reads its cursor through the one codec: a cursor it did not issue is a 400
VALIDATION_ERROR naming ``cursor`` (docs/api-notes.md, "Pagination"), whether it comes from
another list or carries a valid signature over a position of the wrong shape."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.errors import ValidationFailed
from promptrail.collector.services.cursors import CursorCodec, time_key
from tests.collector.contract import assert_error

TRACE = "0123456789abcdef0123456789abcdef"

# (the codec's kind, path, parameters): every list that pages by cursor.
PAGED_LISTS = [
    ("prompts", "/v1/prompts", {}),
    ("prompt-versions", "/v1/prompts/first/versions", {}),
    ("requests", "/v1/requests", {}),
    ("search", "/v1/requests/search", {"query": "hello"}),
    ("scores", "/v1/scores", {}),
    ("datasets", "/v1/datasets", {}),
    ("dataset items", "/v1/datasets/set/items", {}),
    ("traces", "/v1/traces", {}),
    ("trace records", f"/v1/traces/{TRACE}", {}),
    ("sessions", "/v1/sessions", {}),
    ("session records", "/v1/sessions/s1", {}),
    ("users", "/v1/users", {}),
    ("experiments", "/v1/experiments", {}),
]

# Positions no list writes: each is refused by every list, whose codec signed it.
WRONG_SHAPES: list[dict[str, Any]] = [
    {"at": "yesterday", "id": "x"},
    {"at": 5, "id": 1},
    {"id": "x"},
    {"pos": "x", "id": 1},
    {"before": 0},
    {"before": True},
    {},
]


@pytest.fixture
def filled(api: TestClient) -> TestClient:
    """One of everything the lists show, so that each list reaches its cursor."""
    response = api.post(
        "/v1/prompts", json={"name": "first", "template": "Hi {x}", "model": "gpt-4o"}
    )
    assert response.status_code == 201, response.text
    records = [
        {"id": f"req_{i}", "output": "hello", "trace_id": TRACE, "span_id": f"{i:016x}",
         "metadata": {"session_id": "s1", "user_id": "u1"}}
        for i in range(1, 3)
    ]  # fmt: skip
    assert api.post("/v1/requests/batch", json={"records": records}).status_code == 201
    assert api.post("/v1/datasets", json={"name": "set"}).status_code == 201
    return api


def _assert_refused(api: TestClient, path: str, params: dict[str, str], cursor: str) -> None:
    response = api.get(path, params={**params, "limit": 1, "cursor": cursor})

    details = assert_error(response, 400, "VALIDATION_ERROR", type_="validation_error")
    assert details["field"] == "cursor", (path, response.text)


@pytest.mark.parametrize(
    ("kind", "path", "params"), PAGED_LISTS, ids=[kind for kind, _, _ in PAGED_LISTS]
)
def test_a_signed_position_of_the_wrong_shape_is_refused(
    filled: TestClient, settings: Settings, kind: str, path: str, params: dict[str, str]
) -> None:
    codec = CursorCodec(settings.cursor_secret, kind)
    for position in WRONG_SHAPES:
        _assert_refused(filled, path, params, codec.encode(position))


def test_a_cursor_of_one_list_is_refused_by_every_other(filled: TestClient) -> None:
    page = filled.get("/v1/requests", params={"limit": 1}).json()
    issued = page["pagination"]["next_cursor"]
    assert filled.get("/v1/requests", params={"limit": 1, "cursor": issued}).status_code == 200

    for kind, path, params in PAGED_LISTS:
        if kind != "requests":
            _assert_refused(filled, path, params, issued)


def test_the_versions_and_items_lists_refuse_a_time_position() -> None:
    """Lists keyed by a number read only their own shape, not the time lists' one."""
    position = time_key(datetime(2026, 1, 1, tzinfo=UTC), "x")
    for kind, read in (
        ("prompt-versions", lambda p: int(p["before"])),
        ("dataset items", lambda p: (int(p["pos"]), str(p["id"]))),
    ):
        codec = CursorCodec("secret", kind)
        with pytest.raises(ValidationFailed) as raised:
            codec.after(codec.encode(position), read)

        assert raised.value.details["field"] == "cursor"


def test_next_page_cuts_the_page_and_points_after_its_last_row() -> None:
    codec = CursorCodec("secret", "numbers")
    rows = [5, 4, 3]

    page, cursor = codec.next_page(rows, 2, lambda n: {"before": n})

    assert page == [5, 4]
    assert codec.after(cursor, lambda p: int(p["before"])) == 4
    assert codec.next_page(rows, 3, lambda n: {"before": n}) == ([5, 4, 3], None)
    assert codec.after(None, lambda p: int(p["before"])) is None
    assert codec.after_time(None) is None
