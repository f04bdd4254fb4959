"""``promptrail.run_experiment`` and ``client.datasets`` / ``client.experiments``
(docs/api-notes.md, "Datasets and experiments"; issue 33 points 5 and 7): a live collector, the real
``openai`` SDK against the OpenAI wire stub, captured by promptrail as usual."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import fetch_records
from tests.keys import DEFAULT_KEY
from tests.provider_clients import close_opened, openai_client

REPLY = "Paris"


@pytest.fixture
def capitals(sdk: promptrail.Client) -> str:
    sdk.datasets.create("capitals", description="two capitals")
    result = sdk.datasets.add_items(
        "capitals",
        [
            {"id": "fr", "input_variables": {"country": "France"}, "expected_output": "Paris"},
            {"id": "uk", "input_variables": {"country": "UK"}, "expected_output": "London"},
            {"id": "boom", "input_variables": {"country": "Atlantis"}, "expected_output": "?"},
        ],
    )
    assert result.accepted == 3
    return "capitals"


def test_run_experiment_runs_the_task_here_captures_its_calls_and_stores_the_experiment(
    live_url: str, sdk: promptrail.Client, capitals: str, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = REPLY
    promptrail.shutdown()
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)
    promptrail.instrument()
    llm = openai_client(openai_stub)
    try:

        def ask(item: dict[str, Any]) -> str:
            country = item["input_variables"]["country"]
            if country == "Atlantis":
                raise LookupError("no such country")
            reply = llm.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": f"Capital of {country}?"}],
            )
            return reply.choices[0].message.content or ""

        def short(item: dict[str, Any], output: str) -> bool:
            return len(output) < 10

        run = promptrail.run_experiment(
            capitals,
            ask,
            ["exact_match", {"type": "regex", "pattern": "^P"}, short],
            name="local v1",
            repetitions=2,
            concurrency=3,
            client=sdk,
            progress=False,
        )
    finally:
        promptrail.uninstrument()
        promptrail.shutdown()
        close_opened()
    assert run.id.startswith("exp_") and run.experiment.status == "completed"
    assert run.experiment.task == "client" and run.experiment.name == "local v1"
    counts = run.experiment.counts
    assert (counts.items, counts.runs, counts.done, counts.errors) == (3, 6, 6, 2)
    exact = run.summary.scores["exact_match"]
    assert (exact.mean, exact.count) == (0.5, 4)
    assert exact.ci_low is not None and exact.ci_low < 0.5 < (exact.ci_high or 0)
    assert run.summary.scores["short"].mean == 1.0

    # The collector serves it like a run on the service.
    results = list(sdk.experiments.results(run.id, limit=2))
    assert [(r.item_id, r.repetition) for r in results] == [
        ("fr", 1), ("fr", 2), ("uk", 1), ("uk", 2), ("boom", 1), ("boom", 2),
    ]  # fmt: skip
    fr, boom = results[0], results[4]
    assert fr.output == REPLY and fr.scores == {"exact_match": True, "regex": True, "short": True}
    assert fr.input_variables == {"country": "France"} and fr.expected_output == "Paris"
    assert boom.status == "error" and "no such country" in (boom.error or "")
    # Each result names the captured provider call it made, labelled with its item.
    assert fr.request_id and fr.trace_id
    # The task's spans and calls are stored under promptrail-experiment, out of the default list
    # (docs/api-notes.md, "Datasets and experiments"): waiting for them there only ran out the
    # wait's 15 s. Flush, take what the list shows, and read the record by its id.
    records = fetch_records(live_url, expected=0)
    by_id = {r["id"]: r for r in records}
    record = by_id.get(fr.request_id) or sdk.requests.get(fr.request_id).model_dump()
    assert record["metadata"]["experiment_id"] == run.id
    assert record["metadata"]["dataset_item_id"] == "fr"
    assert record["trace_id"] == fr.trace_id
    # The result's record is the task's own span: the trace's root, a chain (docs/api-notes.md,
    # "Traces, sessions and users"), with the provider call inside it.
    deadline = time.monotonic() + 10
    while True:
        trace = sdk.traces.get(fr.trace_id)
        if len(trace.items) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    kinds = {item.span_name or "": item.kind for item in trace.items}
    assert trace.name == "experiment task" and kinds["experiment task"] == "chain"
    assert record["kind"] == "chain" and trace.llm_calls == 1
    # Each verdict is a score (source eval) on that record.
    deadline = time.monotonic() + 10
    while True:
        scores = {s.name: (s.value, s.source) for s in sdk.scores.list(request_id=fr.request_id)}
        if scores or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert scores["exact_match"] == (True, "eval")
    assert [e.id for e in sdk.experiments.list(dataset="capitals")] == [run.id]


def test_two_runs_compare_and_the_client_reads_everything_sync_and_async(
    live_url: str, sdk: promptrail.Client, capitals: str
) -> None:
    def v1(item: dict[str, Any]) -> str:
        return "Paris" if item["id"] == "fr" else "no idea"

    def v2(item: dict[str, Any]) -> str:
        return {"fr": "Lyon", "uk": "London"}.get(item["id"], "no idea")

    base = promptrail.run_experiment(capitals, v1, ["exact_match"], client=sdk, progress=False)
    candidate = promptrail.run_experiment(capitals, v2, ["exact_match"], client=sdk, progress=False)
    comparison = sdk.experiments.compare(base.id, candidate.id)
    exact = comparison.scores["exact_match"]
    assert (exact["improved"], exact["regressed"], exact["unchanged"]) == (1, 1, 1)
    assert exact["delta"] == 0.0
    assert comparison.items[0]["item_id"] == "fr"  # the regression first
    assert comparison.items[0]["delta"] == {"exact_match": -1.0}
    page = sdk.experiments.compare(base.id, candidate.id, limit=2)
    assert len(page.items) == 2 and page.next_cursor
    assert [d.name for d in sdk.datasets.list()] == ["capitals"]
    assert sdk.datasets.get("capitals").item_count == 3
    assert sdk.datasets.delete_item("capitals", "boom").id == "boom"
    assert [i.id for i in sdk.datasets.items("capitals")] == ["fr", "uk"]

    async def read() -> tuple[Any, ...]:
        async with promptrail.AsyncClient(api_key=DEFAULT_KEY, base_url=live_url) as aclient:
            got = await aclient.experiments.get(base.id)
            results = [r async for r in aclient.experiments.results(base.id)]
            compared = await aclient.experiments.compare(base.id, candidate.id)
            dataset = await aclient.datasets.get("capitals")
            return got, results, compared, dataset

    got, results, compared, dataset = asyncio.run(read())
    assert got.id == base.id and got.status == "completed"
    assert len(results) == 3 and compared.unmatched == 0 and dataset.name == "capitals"


def test_bad_calls_fail_before_anything_runs(sdk: promptrail.Client, capitals: str) -> None:
    ran: list[str] = []

    def task(item: dict[str, Any]) -> str:
        ran.append(item["id"])
        return ""

    for evaluators, message in (
        (["vibes"], "unknown evaluator"),
        (["llm_judge"], "unknown evaluator"),
        ([{"type": "regex", "pattern": "("}], "compiles"),
        (["exact_match", "exact_match"], "two evaluators"),
    ):
        with pytest.raises(ValueError, match=message):
            promptrail.run_experiment(capitals, task, evaluators, client=sdk)
    with pytest.raises(ValueError, match="repetitions"):
        promptrail.run_experiment(capitals, task, repetitions=11, client=sdk)
    with pytest.raises(ValueError, match="concurrency"):
        promptrail.run_experiment(capitals, task, concurrency=0, client=sdk)
    with pytest.raises(promptrail.NotFoundError):
        promptrail.run_experiment("nothing", task, client=sdk)
    assert ran == []
    assert list(sdk.experiments.list()) == []
    with pytest.raises(promptrail.ConflictError):
        sdk.datasets.create("capitals")
    answer = httpx.get(
        f"{sdk.base_url}/v1/experiments/exp_none", headers={"X-API-Key": DEFAULT_KEY}
    )
    assert answer.json()["error"]["code"] == "EXPERIMENT_NOT_FOUND"
    with pytest.raises(promptrail.NotFoundError):
        sdk.experiments.get("exp_none")
