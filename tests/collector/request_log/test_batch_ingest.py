"""Batch ingest: the stored values, bodies that are not a batch, retries, bad records."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.request_log.steps import ids, record

JSON = {"Content-Type": "application/json"}


def batch(api: TestClient, records: list[Any], **headers: str) -> dict[str, Any]:
    response = api.post("/v1/requests/batch", json={"records": records}, headers=headers)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def detail(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def posted_raw(api: TestClient, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    response = api.post("/v1/requests/batch", content=body, headers=headers)
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    return error


# -- what is stored -----------------------------------------------------------------------

VARIED: list[dict[str, Any]] = [
    record(),
    record(
        created_at="2026-02-03T04:05:06.789123+02:00",
        input_variables={"q": "naïve café ☕", "n": 3, "f": 0.1, "nested": {"a": [1, "x"]}},
        output={"content": 'quote " backslash \\ newline \n tab \t', "score": 1e-6},
        metadata={"user_id": "u9", "count": 5, "flag": True, "none": None, "obj": {"k": [1]}},
        input=[{"role": "user", "content": "Hello"}],
        usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 99},
        timing={"total_latency_ms": 77, "pre_process_ms": 1, "llm_call_ms": 70},
        integration={"pre_process_executed": True, "errors": ["e1", {"k": 2}]},
        time_to_first_token_ms=12,
        status="error",
        error="boom",
        provider="openai",
        trace_id="0" * 31 + "1",
        span_id="0" * 15 + "2",
        parent_span_id="0" * 15 + "3",
        span_name="chat",
    ),
    record(input="a plain string input", output=None, metadata={}, usage={}, latency_ms=None),
    record(input=42, output="", version=None, created_at="2026-02-03T04:05:06"),
    record(input={"big": 123456789012345678901234567890}, usage={"estimated_cost_usd": 0}),
]


@pytest.mark.parametrize("index", range(len(VARIED)))
def test_a_batched_record_is_stored_exactly_like_a_single_one(api: TestClient, index: int) -> None:
    fields = VARIED[index]
    single = api.post("/v1/requests", json={**fields, "id": "req_single"})
    assert single.status_code == 201, single.text

    assert batch(api, [{**fields, "id": "req_batched"}]) == {"accepted": 1, "rejected": []}

    stored = detail(api, "req_batched")
    expected = {**detail(api, "req_single"), "id": "req_batched"}
    if "created_at" not in fields:
        stored.pop("created_at")
        expected.pop("created_at")
    assert stored == expected


def test_client_times_with_an_offset_are_stored_in_utc(api: TestClient) -> None:
    batch(api, [record(id="req_tz", created_at="2026-02-03T04:05:06.789123+02:00")])

    assert detail(api, "req_tz")["created_at"] == "2026-02-03T02:05:06.789000Z"
    assert ids(api, start_date="2026-02-03T02:05:06Z", end_date="2026-02-03T02:05:07Z") == [
        "req_tz"
    ]


def test_metadata_filters_match_non_string_values_by_their_json_text(api: TestClient) -> None:
    batch(
        api,
        [
            record(id="req_m1", metadata={"count": 5, "flag": True, "none": None, "o": {"k": 1}}),
            record(id="req_m2", metadata={"count": "5"}),
            record(id="req_m3", metadata={"count": 6}),
        ],
    )

    assert sorted(ids(api, **{"metadata.count": "5"})) == ["req_m1", "req_m2"]
    assert ids(api, **{"metadata.flag": "true"}) == ["req_m1"]
    assert ids(api, **{"metadata.none": "null"}) == ["req_m1"]
    assert ids(api, **{"metadata.o": '{"k":1}'}) == ["req_m1"]


def test_search_finds_batched_records_in_every_field_kind(api: TestClient) -> None:
    batch(
        api,
        [
            record(id="req_s1", input_variables={"city": "Lisbon"}, output="nothing"),
            record(id="req_s2", output={"content": "x", "summary": "LISBON"}),
            record(id="req_s3", metadata={"from": "lisbon-hq"}, output="x"),
            record(id="req_s4", input=[{"content": "about Lisbon"}], output="x"),
            record(id="req_s5", input_variables={"n": 7411}, output="x"),
            record(id="req_s6", output="Porto"),
        ],
    )

    found = api.get("/v1/requests/search", params={"query": "lisbon", "limit": 100}).json()
    numbers = api.get("/v1/requests/search", params={"query": "741"}).json()

    assert sorted(h["id"] for h in found["data"]) == ["req_s1", "req_s2", "req_s3", "req_s4"]
    assert [h["id"] for h in numbers["data"]] == ["req_s5"]


# -- retries and bad records ----------------------------------------------------------------


def test_retried_batch_of_unstamped_records_keeps_their_first_time(api: TestClient) -> None:
    records = [record(id=f"req_u{i}") for i in range(5)]

    batch(api, records)
    first = {i: detail(api, i)["created_at"] for i in ids(api)}
    batch(api, records)

    assert {i: detail(api, i)["created_at"] for i in ids(api)} == first
    assert len(ids(api)) == 5


def test_gzip_batch_with_a_bad_record_keeps_the_good_ones(api: TestClient) -> None:
    records = [record(id="req_g1"), record(version=0), record(id="req_g2")]
    body = gzip.compress(json.dumps({"records": records}).encode())

    response = api.post(
        "/v1/requests/batch", content=body, headers={**JSON, "Content-Encoding": "gzip"}
    )

    assert response.status_code == 201, response.text
    assert response.json()["data"]["accepted"] == 2
    assert [r["index"] for r in response.json()["data"]["rejected"]] == [1]
    assert sorted(ids(api)) == ["req_g1", "req_g2"]


def test_a_record_with_a_lone_surrogate_is_rejected_alone(api: TestClient) -> None:
    good = json.dumps(record(id="req_ok"))
    bad = json.dumps(record(id="req_bad")).replace("Long article", "Long \\ud800 article")
    body = ('{"records": [' + good + ", " + bad + "]}").encode()

    response = api.post("/v1/requests/batch", content=body, headers=JSON)

    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["accepted"] == 1
    assert [r["index"] for r in data["rejected"]] == [1]
    assert data["rejected"][0]["error"]["code"] == "VALIDATION_ERROR"
    assert ids(api) == ["req_ok"]


def test_extra_fields_of_the_envelope_are_ignored(api: TestClient) -> None:
    response = api.post("/v1/requests/batch", json={"records": [record()], "note": "x"})

    assert response.status_code == 201
    assert response.json()["data"]["accepted"] == 1


# -- bodies that are not a batch -------------------------------------------------------------


def test_malformed_json_is_400_naming_the_body(api: TestClient) -> None:
    error = posted_raw(api, b'{"records": [', JSON)

    assert error["message"] == "Malformed JSON body: Expecting value at line 1, column 14"
    assert error["details"]["field"] == "body"
    assert (error["details"]["line"], error["details"]["column"]) == (1, 14)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{}", "records"),
        (b'{"records": {}}', "records"),
        (b"[]", "body"),
        (b"", "body"),
    ],
)
def test_a_body_that_is_not_a_batch_is_400(api: TestClient, body: bytes, field: str) -> None:
    error = posted_raw(api, body, JSON)

    assert error["details"]["field"] == field
    assert ids(api) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[" * 5000 + b"]" * 5000, "body"),
        (b"[" * 300 + b"]" * 300, "body"),
        (b'{"other": ' + b"[" * 5000 + b"]" * 5000 + b"}", "records"),
        (b'{"records": ' + b"{" * 1 + b'"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "records"),
    ],
)
def test_a_deep_body_that_is_not_a_batch_is_400(api: TestClient, body: bytes, field: str) -> None:
    """However deep, a document without a records array is refused, not an empty batch."""
    error = posted_raw(api, body, JSON)

    assert error["details"]["field"] == field
    assert ids(api) == []


def test_a_body_that_is_not_json_by_its_content_type_is_400(api: TestClient) -> None:
    body = json.dumps({"records": [record()]}).encode()

    error = posted_raw(api, body, {"Content-Type": "text/plain"})

    assert error["details"]["field"] == "body"
    assert ids(api) == []


def test_a_body_in_another_unicode_encoding_is_read_like_before(api: TestClient) -> None:
    body = json.dumps({"records": [record(id="req_utf16")]}).encode("utf-16")

    response = api.post("/v1/requests/batch", content=body, headers=JSON)

    assert response.status_code == 201, response.text
    assert ids(api) == ["req_utf16"]
