"""``promptrail.score``, ``current_trace_id`` and ``last_request_id`` against a live collector.

Scores go through the same shipper as records (queue, background posts to
``/v1/scores/batch``, retries, counted drops); these tests read back what the collector stored
over real HTTP, and check the ids the SDK hands out are the ones the collector stores.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider

import promptrail
from promptrail import _runtime
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, free_port, serve
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY
from tests.sdk.score_steps import drops_and_refusals, stored_scores


def assert_balanced(counts: dict[str, Any]) -> None:
    """Every score is exported, pending or dropped for a reason: none vanish."""
    assert counts["captured"] == counts["exported"] + counts["pending"] + counts["dropped_total"]


# These tests pin the memory-only mode (``PROMPTRAIL_DISK_CACHE=0``, tests/sdk/conftest.py): scores
# waiting for the collector stay in the process. With the disk spool (the default): test_outage.py.
pytestmark = pytest.mark.usefixtures("memory_only")


@pytest.fixture
def capture() -> Iterator[None]:
    """Fresh counters; at the end every score is accounted for."""
    promptrail.shutdown()
    _runtime.reset_stats()
    yield
    promptrail.shutdown()
    assert_balanced(promptrail.stats()["scores"])


@pytest.fixture
def model_api(openai_stub: OpenAIStub) -> Iterator[openai.OpenAI]:
    """An OpenAI client of the stub whose calls promptrail captures (``instrument()``)."""
    promptrail.instrument()
    api = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)
    try:
        yield api
    finally:
        api.close()
        promptrail.uninstrument()


@promptrail.observe(name="answer", exclude=["api"])
def answer(api: openai.OpenAI, question: str) -> str | None:
    api.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
    )
    promptrail.score("on_topic", True)  # no target: the current trace
    return promptrail.current_trace_id()


def test_outside_any_trace_there_is_no_trace_and_no_record(capture: None) -> None:
    seen: list[Any] = []

    def fresh_thread() -> None:
        seen.extend([promptrail.current_trace_id(), promptrail.last_request_id()])

    worker = threading.Thread(target=fresh_thread)
    worker.start()
    worker.join()
    with promptrail.context(user_id="u1"):  # labels records; starts no trace
        inside_context = promptrail.current_trace_id()

    assert seen == [None, None]
    assert inside_context is None


def test_scores_reach_the_collector_on_the_right_record_and_trace(
    live_url: str, capture: None, model_api: openai.OpenAI
) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)

    trace_id = answer(model_api, "capital of France?")
    request_id = promptrail.last_request_id()  # the model call made inside answer()
    promptrail.score(
        "helpfulness",
        0.8,
        request_id=request_id,
        comment="close",
        correction="Paris.",
        metadata={"reviewer": "ci"},
    )
    assert promptrail.flush(timeout=10)

    record = httpx.get(f"{live_url}/v1/requests/{request_id}", headers=DEFAULT_AUTH)
    assert record.status_code == 200, record.text
    assert record.json()["data"]["trace_id"] == trace_id  # the ids are the collector's
    assert record.json()["data"]["kind"] == "llm"  # the call, not answer()'s own span
    on_record = stored_scores(live_url, request_id=str(request_id))
    on_trace = stored_scores(live_url, trace_id=str(trace_id))
    assert [(s["name"], s["value"], s["source"]) for s in on_record] == [
        ("helpfulness", 0.8, "sdk")
    ]
    assert (on_record[0]["comment"], on_record[0]["correction"]) == ("close", "Paris.")
    assert on_record[0]["metadata"] == {"reviewer": "ci"}
    assert on_record[0]["id"].startswith("score_")
    assert [(s["name"], s["value"], s["data_type"]) for s in on_trace] == [
        ("on_topic", True, "boolean")
    ]
    counts = promptrail.stats()["scores"]
    assert (counts["captured"], counts["exported"], counts["dropped_total"]) == (2, 2, 0)


def test_a_score_with_its_own_id_replaces_the_earlier_one(live_url: str, capture: None) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)

    promptrail.score("label", "good", request_id="req_own_id", id="vote-1")
    assert promptrail.flush(timeout=10)
    promptrail.score("label", "bad", request_id="req_own_id", id="vote-1")
    assert promptrail.flush(timeout=10)

    stored = stored_scores(live_url, request_id="req_own_id")
    assert [(s["id"], s["value"], s["data_type"]) for s in stored] == [
        ("vote-1", "bad", "categorical")
    ]


def test_collector_down_then_back_scores_arrive_once(settings: Settings, capture: None) -> None:
    port = free_port()
    promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{port}", flush_interval=0.05)

    for n in range(5):
        promptrail.score("n", n, request_id=f"req_down_{n}")
    assert promptrail.flush(timeout=0.5) is False
    assert promptrail.stats()["scores"]["pending"] == 5

    with serve(create_app(settings), port=port) as url:
        assert promptrail.flush(timeout=10)
        assert promptrail.flush(timeout=10)  # nothing is sent twice
        stored = [stored_scores(url, request_id=f"req_down_{n}") for n in range(5)]

    assert [[s["value"] for s in scores] for scores in stored] == [[0], [1], [2], [3], [4]]
    counts = promptrail.stats()["scores"]
    assert (counts["exported"], counts["dropped_total"]) == (5, 0)


@pytest.mark.parametrize(
    ("arguments", "mistake"),
    [
        ({"name": "", "value": 1, "request_id": "req_1"}, "name must be"),
        ({"name": "x", "value": [1], "request_id": "req_1"}, "value must be"),
        ({"name": "x", "value": float("nan"), "request_id": "req_1"}, "finite"),
        ({"name": "x", "value": "yes", "request_id": "req_1", "data_type": "boolean"}, "boolean"),
        ({"name": "x", "value": 1}, "exactly one of request_id and trace_id"),
        ({"name": "x", "value": 1, "request_id": "r", "trace_id": "ab" * 16}, "exactly one"),
        ({"name": "x", "value": 1, "trace_id": "not-hex"}, "32 lowercase hex"),
        ({"name": "x", "value": 1, "request_id": "req_1", "id": "no spaces"}, "id must be"),
        ({"name": "x", "value": 1, "request_id": "req_1", "comment": 3}, "comment"),
        ({"name": "x", "value": 1, "request_id": "req_1", "metadata": [1]}, "metadata"),
    ],
)
def test_a_bad_score_never_raises_is_logged_once_and_counted(
    capture: None,
    caplog: pytest.LogCaptureFixture,
    arguments: dict[str, Any],
    mistake: str,
) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}")
    from promptrail import _scores

    _scores._warned.clear()

    with caplog.at_level(logging.WARNING, logger="promptrail"):
        promptrail.score(**arguments)
        promptrail.score(**arguments)

    lines = [r.getMessage() for r in caplog.records if "score dropped" in r.getMessage()]
    assert len(lines) == 1 and mistake in lines[0], lines
    counts = promptrail.stats()["scores"]
    assert counts["dropped"] == {"invalid": 2} and counts["pending"] == 0


# Scores at the edges of each rule (name, target, id, value against its type): each is
# either dropped by the SDK or stored by the collector, never queued and then refused.
EDGES: list[dict[str, Any]] = [
    {"name": "n" * 100, "value": 1, "request_id": "req_1"},
    {"name": "n" * 101, "value": 1, "request_id": "req_1"},
    {"name": "x", "value": 1, "request_id": "r" * 200},
    {"name": "x", "value": 1, "request_id": "r" * 201},
    {"name": "x", "value": 1, "trace_id": "ab" * 16},
    {"name": "x", "value": 1, "trace_id": "AB" * 16},
    {"name": "x", "value": 1, "trace_id": "ab" * 16 + "\n"},
    {"name": "x", "value": 1, "request_id": "req_1", "id": "a" * 128},
    {"name": "x", "value": 1, "request_id": "req_1", "id": "a" * 129},
    {"name": "x", "value": 1, "request_id": "req_1", "id": "with space"},
    {"name": "x", "value": True, "request_id": "req_1", "data_type": "numeric"},
    {"name": "x", "value": 1, "request_id": "req_1", "data_type": "boolean"},
    {"name": "x", "value": "good", "request_id": "req_1", "data_type": "categorical"},
    {"name": "x", "value": 0.5, "request_id": "req_1", "data_type": "categorical"},
]


def test_the_sdk_drops_exactly_the_scores_the_collector_refuses(
    live_url: str, capture: None
) -> None:
    dropped_by_sdk, refused = drops_and_refusals(live_url, EDGES, "edge")

    assert dropped_by_sdk == [n in refused for n in range(len(EDGES))]
    assert 0 < len(refused) < len(EDGES)
    counts = promptrail.stats()["scores"]
    assert counts["exported"] == len(EDGES) - len(refused)  # none queued only to be refused


def test_disabled_capture_scores_nothing(capture: None) -> None:
    promptrail.init(enabled=False)

    promptrail.score("x", 1, request_id="req_1")

    assert promptrail.stats()["scores"]["captured"] == 0


def test_last_request_id_is_per_thread_and_per_task(capture: None) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}")

    @promptrail.observe(name="step", kind="llm")  # its record is a model call
    def step() -> str | None:
        return promptrail.current_trace_id()

    step()
    mine = promptrail.last_request_id()
    in_thread: list[str | None] = []

    def other() -> None:
        in_thread.append(promptrail.last_request_id())  # nothing captured in this thread yet
        step()
        in_thread.append(promptrail.last_request_id())

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()

    async def task() -> tuple[str | None, str | None]:
        inherited = promptrail.last_request_id()
        step()
        return inherited, promptrail.last_request_id()

    async def both() -> list[tuple[str | None, str | None]]:
        return list(await asyncio.gather(task(), task()))

    results = asyncio.run(both())

    assert mine is not None and mine.startswith("req_") and len(mine) == 4 + 48
    assert in_thread[0] is None and in_thread[1] not in (None, mine)
    assert promptrail.last_request_id() == mine  # the thread and the tasks left ours alone
    assert [inherited for inherited, _ in results] == [mine, mine]
    assert len({own for _, own in results} | {mine}) == 3


def test_a_project_over_its_rate_gets_its_scores_after_retry_after(
    settings: Settings, capture: None
) -> None:
    # One request per 3 s: the flushes below come well within one window, even on a loaded
    # machine, so the post after the first is refused with a Retry-After, waited out, then
    # stored. The limit's sliding window rounds its count down, so a post just past a
    # window's edge may still go through: then the one after it is refused.
    limited = settings.model_copy(update={"limit_requests": "1/3 seconds"})
    with serve(create_app(limited)) as url:
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=60, export_timeout=10)
        promptrail.score("first", 1, request_id="req_rate")
        assert promptrail.flush(timeout=10)  # the window's one request
        sent = {"first": 1.0}
        for name, value in (("second", 2.0), ("third", 3.0)):
            promptrail.score(name, value, request_id="req_rate")
            assert promptrail.flush(timeout=10)
            sent[name] = value
            counts = promptrail.stats()["scores"]
            if counts.get("export_retries", 0) >= 1:
                break
        with promptrail.Client(DEFAULT_KEY, url, max_retries=3) as reader:  # reads wait too
            stored = {s.name: s.value for s in reader.scores.list(request_id="req_rate")}

    assert stored == sent
    assert counts.get("export_retries", 0) >= 1
    assert (counts["exported"], counts["dropped_total"]) == (len(sent), 0)


def test_scores_unsent_at_shutdown_are_counted_and_the_exit_is_quick(
    capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    promptrail.init(api_key=DEFAULT_KEY, base_url=url)
    for n in range(3):
        promptrail.score("n", n, request_id="req_exit")
    with caplog.at_level(logging.WARNING, logger="promptrail"):
        assert promptrail.flush(timeout=0.3) is False  # the collector is known down now
        started = time.monotonic()
        promptrail.shutdown()

    assert time.monotonic() - started < 2.5  # one quick attempt, not the 3 s bound
    lines = [r.getMessage() for r in caplog.records]
    assert f"promptrail: collector at {url} unreachable (connection refused); scores wait" in (
        "\n".join(lines)
    )
    assert any(line.startswith("promptrail: 3 scores dropped at shutdown: ") for line in lines)
    counts = promptrail.stats()["scores"]
    assert counts["dropped"] == {"shutdown_unsent": 3} and counts["pending"] == 0


def test_scores_waiting_are_bounded_by_the_capture_budget(
    capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="promptrail")
    promptrail.init(
        api_key=DEFAULT_KEY,
        base_url=f"http://127.0.0.1:{free_port()}",
        max_queue_bytes=1_000_000,
        flush_interval=60,  # all of them wait in the queue
    )

    for n in range(600):  # ~0.6 MB by the scores' own estimate: all kept
        promptrail.score("n", n, request_id="req_budget")
    kept = promptrail.stats()["scores"]
    for n in range(2000):  # far past it: the new ones are dropped and counted
        promptrail.score("n", n, request_id="req_budget")
    full = promptrail.stats()["scores"]

    assert (kept["pending"], kept["dropped_total"]) == (600, 0)
    assert full["dropped"]["queue_full"] > 0
    assert full["pending"] + full["dropped"]["queue_full"] == 2600
    over = [r.getMessage() for r in caplog.records if "over its memory budget" in r.getMessage()]
    assert len(over) == 1 and "dropping new scores" in over[0]


def test_with_your_own_tracer_provider_the_ids_are_the_collectors_too(
    live_url: str, capture: None, model_api: openai.OpenAI
) -> None:
    provider = TracerProvider()
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=live_url, tracer_provider=provider, flush_interval=0.05
    )

    trace_id = answer(model_api, "capital of Italy?")
    request_id = promptrail.last_request_id()
    assert promptrail.flush(timeout=10)
    provider.shutdown()

    record = httpx.get(f"{live_url}/v1/requests/{request_id}", headers=DEFAULT_AUTH)
    assert record.status_code == 200, record.text
    assert record.json()["data"]["trace_id"] == trace_id
    assert record.json()["data"]["kind"] == "llm"
    assert [s["name"] for s in stored_scores(live_url, trace_id=str(trace_id))] == ["on_topic"]
