"""A client-run experiment's traffic is the service's own (issue 47 point 1, docs/api-notes.md
"Environments"): ``promptrail.run_experiment`` runs its task in the caller's process, whose
records arrive in the caller's environment; the collector stores every record naming one of
the project's client experiments under ``promptrail-experiment``, so the request log, the
traces list and the review queue are not filled with experiment runs. A live collector, the
real ``openai`` SDK against the OpenAI wire stub inside the task."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capitals_experiment import capitals_task
from tests.collector.request_log.otlp_payloads import attribute, json_span, string_value
from tests.keys import DEFAULT_AUTH

EXPERIMENT = "promptrail-experiment"


@pytest.fixture
def http(live_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_url, headers=DEFAULT_AUTH, timeout=30) as client:
        yield client


def read(http: httpx.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    response = http.get(path, params={"limit": 100, **params})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def run_capitals(
    live_url: str, sdk: promptrail.Client, stub: OpenAIStub
) -> promptrail.ExperimentRun:
    """A two-item experiment whose task asks the model through the real openai SDK, logged
    as an application logs by default (production)."""
    with capitals_task(live_url, sdk, stub) as ask:
        return promptrail.run_experiment("capitals", ask, ["contains"], client=sdk, progress=False)


def test_a_client_experiments_records_and_traces_are_hidden_from_the_default_views(
    live_url: str, sdk: promptrail.Client, http: httpx.Client, openai_stub: OpenAIStub
) -> None:
    run = run_capitals(live_url, sdk, openai_stub)
    results = list(sdk.experiments.results(run.id))
    traces = {r.trace_id or "" for r in results}
    assert len(traces) == 2 and "" not in traces
    # Every record of each result's trace (the "experiment task" span and the model call in
    # it) is the service's own, though the SDK logged them in production; a read by trace
    # shows them.
    by_trace = [r for t in traces for r in read(http, "/v1/requests", trace_id=t, kind="all")]
    assert {(r["kind"], r["span_name"]) for r in by_trace if r["kind"] != "llm"} == {
        ("chain", "experiment task")
    }
    assert {r["environment"] for r in by_trace} == {EXPERIMENT}
    calls = {r["id"] for r in by_trace if r["kind"] == "llm"}
    assert len(calls) == 2
    everything = {r["id"] for r in by_trace}
    # An application call logged alongside stays in production, and in every default view.
    app = http.post("/v1/requests", json={"prompt_name": "support", "output": "hi"})
    assert app.status_code == 201, app.text
    app_id = app.json()["data"]["id"]
    assert app.json()["data"]["environment"] == "production"

    # The request log, the review queue and the traces list show none of the experiment.
    assert {r["id"] for r in read(http, "/v1/requests", kind="all")} == {app_id}
    assert {r["id"] for r in read(http, "/v1/requests", unscored="thumbs")} == {app_id}
    assert not traces & {t["trace_id"] for t in read(http, "/v1/traces")}
    # With environment=all (or the service's own) they are all there.
    shown = {r["id"] for r in read(http, "/v1/requests", kind="all", environment="all")}
    assert shown == everything | {app_id}
    assert {r["id"] for r in read(http, "/v1/requests", environment=EXPERIMENT)} == calls
    assert traces <= {t["trace_id"] for t in read(http, "/v1/traces", environment="all")}
    for trace_id in traces:
        trace = http.get(f"/v1/traces/{trace_id}").json()["data"]
        assert {i["environment"] for i in trace["items"]} == {EXPERIMENT}
    # The results still cost their calls.
    assert all(r.estimated_cost_usd > 0 for r in results)
    assert sdk.experiments.get(run.id).summary.estimated_cost_usd > 0


def test_a_record_naming_an_experiment_is_the_services_only_if_the_experiment_is_a_client_one(
    live_url: str, sdk: promptrail.Client, http: httpx.Client, openai_stub: OpenAIStub
) -> None:
    run = run_capitals(live_url, sdk, openai_stub)
    batch = {
        "records": [
            # Sent in staging, naming the project's client experiment: the service's own.
            {"id": "req_known", "environment": "staging", "metadata": {"experiment_id": run.id}},
            # An experiment id the project has not: the record keeps its environment.
            {
                "id": "req_unknown",
                "environment": "staging",
                "metadata": {"experiment_id": "exp_" + "0" * 32},
            },
            {"id": "req_not_text", "metadata": {"experiment_id": 7}},
        ]
    }
    response = http.post("/v1/requests/batch", json=batch)
    assert response.status_code == 201, response.text
    assert response.json()["data"] == {"accepted": 3, "rejected": []}
    listed = {r["id"]: r["environment"] for r in read(http, "/v1/requests", environment="all")}
    assert listed["req_known"] == EXPERIMENT
    assert listed["req_unknown"] == "staging"
    assert listed["req_not_text"] == "production"
    # Asked again (now from memory, not the store), the answers are the same.
    again = http.post(
        "/v1/requests", json={"id": "req_again", "metadata": {"experiment_id": run.id}}
    )
    assert again.status_code == 201 and again.json()["data"]["environment"] == EXPERIMENT
    other = {"id": "req_other", "metadata": {"experiment_id": "exp_" + "0" * 32}}
    assert http.post("/v1/requests", json=other).json()["data"]["environment"] == "production"
    default = {r["id"] for r in read(http, "/v1/requests")}
    assert {"req_unknown", "req_not_text", "req_other"} <= default
    assert not {"req_known", "req_again"} & default


def test_an_otlp_span_naming_a_client_experiment_is_the_services(
    live_url: str, sdk: promptrail.Client, http: httpx.Client, openai_stub: OpenAIStub
) -> None:
    run = run_capitals(live_url, sdk, openai_stub)
    spans = [
        json_span(
            span_id,
            [
                attribute("gen_ai.provider.name", string_value("mistral_ai")),
                attribute("gen_ai.request.model", string_value("mistral-small")),
                attribute("promptrail.metadata", string_value(f'{{"experiment_id": "{eid}"}}')),
            ],
        )
        for span_id, eid in (("00000000000000e1", run.id), ("00000000000000e2", "exp_other"))
    ]
    resource = {"attributes": [attribute("deployment.environment", string_value("staging"))]}
    document = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    response = http.post("/v1/traces", json=document)
    assert response.status_code == 200, response.text
    listed = read(http, "/v1/requests", environment="all")
    assert {
        r["span_id"]: r["environment"] for r in listed if r["span_id"].startswith("00000000000000e")
    } == {
        "00000000000000e1": EXPERIMENT,
        "00000000000000e2": "staging",
    }
