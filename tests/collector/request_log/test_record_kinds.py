"""Record kinds (issue 32 point 1, docs/api-notes.md, "Traces, sessions and users"): every record
has one; the request log, search and exports show model calls unless ``kind=`` asks; a trace's list
shows every kind; OTLP spans get theirs from GenAI operations and OpenInference span kinds; records
stored before the kinds get one from what their rows have (migration 17)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_tables import REQUEST_ITEMS_MV
from tests.collector.pages import walk
from tests.collector.request_log.export_steps import finish, start
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 5, 2, 9, tzinfo=UTC)
TRACE = "0af7651916cd43dd8448eb211c80319c"
KINDS = ("llm", "embedding", "chain", "agent", "tool", "retriever", "span")


def record(i: int, kind: str | None, **extra: Any) -> dict[str, Any]:
    """A record of ``kind`` (None: logged without one), a minute after the last, in TRACE."""
    made: dict[str, Any] = {
        "id": f"req_kind-{i:02d}",
        "created_at": (START + timedelta(minutes=i)).isoformat(),
        "trace_id": TRACE,
        "span_id": f"{i + 1:016x}",
        "output": {"content": f"needle {kind}"},
        **extra,
    }
    if kind is not None:
        made["kind"] = kind
    return made


@pytest.fixture
def logged(api: TestClient) -> list[dict[str, Any]]:
    """One record of each kind, and one logged without a kind, all in one trace."""
    records = [record(i, kind) for i, kind in enumerate(KINDS)] + [record(len(KINDS), None)]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.json()["data"] == {"accepted": len(records), "rejected": []}
    return records


def kinds_listed(api: TestClient, **params: Any) -> list[str]:
    body = api.get("/v1/requests", params={"limit": 100, **params}).json()
    return [item["kind"] for item in body["data"]]


def test_a_record_carries_its_kind_and_one_logged_without_is_llm(
    api: TestClient, logged: list[dict[str, Any]]
) -> None:
    for sent in logged:
        detail = api.get(f"/v1/requests/{sent['id']}").json()["data"]
        assert detail["kind"] == sent.get("kind", "llm"), sent
    answer = api.post("/v1/requests", json={"kind": "tool", "span_name": "lookup"}).json()
    assert answer["data"]["kind"] == "tool"


def test_the_log_lists_model_calls_unless_kind_asks_and_a_trace_lists_every_kind(
    api: TestClient, logged: list[dict[str, Any]]
) -> None:
    newest_first = [r.get("kind", "llm") for r in reversed(logged)]

    assert kinds_listed(api) == ["llm", "embedding", "llm"]
    assert kinds_listed(api, kind="all") == newest_first
    assert kinds_listed(api, kind="tool,chain") == ["tool", "chain"]
    assert kinds_listed(api, kind=" agent ") == ["agent"]
    assert kinds_listed(api, trace_id=TRACE) == newest_first
    assert kinds_listed(api, trace_id=TRACE, kind="span") == ["span"]
    # Pages through cursors skip the other kinds without losing a model call.
    assert walk(api, 1) == ["req_kind-07", "req_kind-01", "req_kind-00"]
    # The metadata index's pages too.
    api.post(
        "/v1/requests/batch",
        json={
            "records": [
                record(20 + i, kind, metadata={"user_id": "u1"})
                for i, kind in enumerate(("chain", "llm", "tool", "llm"))
            ]
        },
    )
    assert walk(api, 1, **{"metadata.user_id": "u1"}) == ["req_kind-23", "req_kind-21"]
    assert kinds_listed(api, **{"metadata.user_id": "u1", "kind": "all"}) == [
        "llm",
        "tool",
        "llm",
        "chain",
    ]


def test_search_finds_model_calls_unless_kind_asks(
    api: TestClient, logged: list[dict[str, Any]]
) -> None:
    def hits(**params: Any) -> list[str]:
        body = api.get("/v1/requests/search", params={"query": "needle", **params}).json()
        return [hit["id"] for hit in body["data"]]

    assert hits() == ["req_kind-07", "req_kind-01", "req_kind-00"]
    assert len(hits(kind="all")) == len(logged)
    assert hits(kind="retriever") == ["req_kind-05"]


def test_an_unknown_kind_is_a_400_naming_kind(api: TestClient) -> None:
    for path, params in (
        ("/v1/requests", {"kind": "llm,model"}),
        ("/v1/requests", {"kind": "ALL"}),
        ("/v1/requests/search", {"query": "x", "kind": "spans"}),
        ("/v1/sessions", {"kind": "x"}),
        ("/v1/users", {"kind": "x"}),
    ):
        response = api.get(path, params=params)
        assert response.status_code == 400, (path, response.text)
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("VALIDATION_ERROR", "kind")
    refused = api.post("/v1/requests", json={"kind": "function"})
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "kind"


def test_otlp_spans_get_their_kinds_from_genai_operations_and_openinference(
    live_url: str,
) -> None:
    def attribute(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    shapes = {
        "chat": [attribute("gen_ai.operation.name", "chat")],
        "embed": [attribute("gen_ai.operation.name", "embeddings")],
        "tool": [attribute("gen_ai.operation.name", "execute_tool")],
        "agent": [attribute("gen_ai.operation.name", "invoke_agent")],
        "oi-chain": [attribute("openinference.span.kind", "CHAIN")],
        "oi-retriever": [attribute("openinference.span.kind", "RETRIEVER")],
        "oi-llm": [attribute("openinference.span.kind", "LLM")],
        "oi-embedding": [attribute("openinference.span.kind", "EMBEDDING")],
        "oi-guardrail": [attribute("openinference.span.kind", "GUARDRAIL")],
        "model-only": [attribute("gen_ai.request.model", "gpt-4o-mini")],
    }
    t0 = 1_777_000_000_000_000_000
    spans = [
        {
            "traceId": TRACE,
            "spanId": f"{i + 1:016x}",
            "name": name,
            "startTimeUnixNano": str(t0 + i * 1_000_000),
            "endTimeUnixNano": str(t0 + i * 1_000_000 + 500_000),
            "attributes": attributes,
            "status": {},
        }
        for i, (name, attributes) in enumerate(shapes.items())
    ]
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    with httpx.Client(base_url=live_url, headers=DEFAULT_AUTH, timeout=30) as client:
        response = client.post(
            "/v1/traces",
            content=json.dumps(document),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 200, response.text
        items = client.get("/v1/requests", params={"trace_id": TRACE, "limit": 100}).json()

    assert {item["span_name"]: item["kind"] for item in items["data"]} == {
        "chat": "llm",
        "embed": "embedding",
        "tool": "tool",
        "agent": "agent",
        "oi-chain": "chain",
        "oi-retriever": "retriever",
        "oi-llm": "llm",
        "oi-embedding": "embedding",
        "oi-guardrail": "span",
        "model-only": "llm",
    }


def test_exports_take_model_calls_unless_their_filters_name_a_kind(
    api: TestClient, logged: list[dict[str, Any]]
) -> None:
    def exported(**filters: Any) -> list[str]:
        export_id = start(api, format="json", filters=filters)["export_id"]
        assert finish(api, export_id)["status"] == "completed"
        text = api.get(f"/v1/requests/exports/{export_id}/download").text
        return [json.loads(line)["id"] for line in text.splitlines()]

    assert exported() == ["req_kind-07", "req_kind-01", "req_kind-00"]
    assert len(exported(kind="all")) == len(logged)
    assert exported(kind="tool") == ["req_kind-04"]
    refused = api.post("/v1/requests/export", json={"filters": {"kind": "nope"}})
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "filters.kind"


def test_analytics_sum_model_calls_unless_filters_name_kinds_sealed_or_not(
    settings: Settings,
) -> None:
    # A collector that seals an hour as soon as nothing touches it.
    sealing = settings.model_copy(update={"rollup_settle_seconds": 0.0})
    with TestClient(create_app(sealing), headers=DEFAULT_AUTH) as api:
        records = [
            record(i, kind, status="error" if i % 2 else "success", latency_ms=100 * (i + 1))
            for i, kind in enumerate(("llm", "chain", "tool", "embedding", "span", "llm"))
        ]
        api.post("/v1/requests/batch", json={"records": records})

        def answer(metric: str, **params: Any) -> tuple[float, dict[str, int]]:
            response = api.get(
                "/v1/requests/analytics",
                params={"metric": metric, "start_date": "2026-05-01", "end_date": "2026-05-03",
                        "group_by": "model", **params},
            )  # fmt: skip
            assert response.status_code == 200, response.text
            data = response.json()["data"]
            return data["total"], {g["name"]: g["count"] for g in data["groups"]}

        def every() -> list[tuple[float, dict[str, int]]]:
            return [
                answer("errors"),
                answer("latency"),
                answer("errors", filters=json.dumps({"kind": "all"})),
                answer("errors", filters=json.dumps({"kind": "chain,tool"})),
            ]

        from_log = every()
        # The model calls: llm (100 ms, success), embedding (400 ms, error), llm (600 ms, error).
        assert from_log == [
            (2.0, {"": 3}),
            (pytest.approx(1100 / 3), {"": 3}),
            (3.0, {"": 6}),  # every kind: chain and span errors too
            (1.0, {"": 2}),  # chain (error) and tool
        ]
        services = api.app.state.services
        assert services.rollups.seal_due() > 0
        assert services.rollups.plan(
            "default", START, START + timedelta(hours=1)
        ).hours  # the hour is read from the rollup now
        assert every() == from_log  # sealed, the same answers
        refused = api.get(
            "/v1/requests/analytics", params={"metric": "cost", "filters": '{"kind": "x"}'}
        )
        assert refused.json()["error"]["details"]["field"] == "filters.kind"


def test_records_stored_before_kinds_get_one_from_their_rows(settings: Settings) -> None:
    db = f"`{settings.database}`"
    old_view = REQUEST_ITEMS_MV.select.replace(", kind FROM", " FROM").format(db=db, local="")
    # The log, its list copy and the copy's view as the release before migration 17 made them.
    undo = [
        f"ALTER TABLE {db}.request_items_mv MODIFY QUERY {old_view}",
        f"ALTER TABLE {db}.request_items DROP COLUMN kind",
        f"ALTER TABLE {db}.requests DROP COLUMN kind",
    ]
    store_before(settings, 17, [], undo)
    old = [
        # (id, model, span_id, span_name): a plain logged call, a model call's span, an
        # observed function's span, an embeddings call's span.
        ("req_old-plain", "gpt-4o-mini", "", ""),
        ("req_old-call", "gpt-4o-mini", "0000000000000002", "chat gpt-4o-mini"),
        ("req_old-step", "", "0000000000000001", "answer"),
        ("req_old-embed", "text-embedding-3-small", "0000000000000003", "embeddings text-e"),
    ]
    client = open_client(settings.store_url)
    try:
        for i, (id_, model, span, name) in enumerate(old):
            trace = TRACE if span else ""
            parent = "" if span in ("", "0000000000000001") else "0000000000000001"
            client.command(
                f"INSERT INTO {db}.requests (project, id, created_at, model, status, trace_id, "
                "span_id, parent_span_id, span_name, total_tokens, row_version, is_deleted) "
                f"VALUES ('default', '{id_}', toDateTime64('{START:%Y-%m-%d %H:%M:%S}', 3, 'UTC') "
                f"+ {i}, '{model}', 'success', '{trace}', '{span}', '{parent}', '{name}', 7, 1, 0)"
            )
    finally:
        client.close()

    app = create_app(settings)  # start-up applies migration 17
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        listed = api.get("/v1/requests", params={"kind": "all"}).json()["data"]
        assert {r["id"]: r["kind"] for r in listed} == {
            "req_old-plain": "llm",
            "req_old-call": "llm",
            "req_old-step": "span",
            "req_old-embed": "embedding",
        }
        assert api.get("/v1/requests/req_old-step").json()["data"]["kind"] == "span"
        assert [r["id"] for r in api.get("/v1/requests").json()["data"]] == [
            "req_old-embed",
            "req_old-call",
            "req_old-plain",
        ]
        # The records already stored are in their trace's index too.
        trace = api.get(f"/v1/traces/{TRACE}").json()["data"]
        assert (trace["name"], trace["records"], trace["llm_calls"]) == ("answer", 3, 2)
        assert trace["total_tokens"] == 21
        # And a record logged after the upgrade keeps the kind it was given.
        api.post("/v1/requests", json={"id": "req_new-tool", "kind": "tool"})
        assert kinds_listed(api, kind="tool") == ["tool"]
