"""Capture on OpenTelemetry, both ways: promptrail's own light spans (the default) and an
application's SDK TracerProvider (``init(tracer_provider=...)``). Either way the spans are
current in the OpenTelemetry context, so traces join across instrumentations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import promptrail
from promptrail import _runtime
from promptrail.integrations._calls import CallRecord
from promptrail.testing import OpenAIStub
from tests.capture import fetch_records as fetch
from tests.keys import DEFAULT_KEY


class App:
    """The application's own tracing: an SDK provider whose spans land in memory."""

    def __init__(self) -> None:
        self.finished = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.finished))
        self.tracer = self.provider.get_tracer("app")


@pytest.fixture
def app() -> Iterator[App]:
    made = App()
    yield made
    made.provider.shutdown()


@pytest.fixture(params=["own spans", "joined"])
def capture_mode(request: pytest.FixtureRequest, live_url: str, app: App) -> Iterator[str]:
    """promptrail capturing with its own spans, or joined to the application's provider."""
    _runtime.reset_stats()
    joined = request.param == "joined"
    promptrail.init(
        api_key=DEFAULT_KEY,
        base_url=live_url,
        flush_interval=0.05,
        tracer_provider=app.provider if joined else None,
    )
    promptrail.instrument("openai")
    yield request.param
    promptrail.uninstrument()
    promptrail.shutdown()


def test_an_application_span_inside_an_observed_function_joins_its_trace(
    capture_mode: str, live_url: str, app: App
) -> None:
    @promptrail.observe(name="handler")
    def handler() -> str:
        current = trace.get_current_span()
        assert current.is_recording()
        with app.tracer.start_as_current_span("database query"):
            return "done"

    assert handler() == "done"

    (record,) = fetch(live_url, 1)
    query = next(s for s in app.finished.get_finished_spans() if s.name == "database query")
    assert query.parent is not None
    assert f"{query.parent.span_id:016x}" == record["span_id"]
    assert f"{query.context.trace_id:032x}" == record["trace_id"]


def test_an_observed_function_inside_an_application_span_joins_that_trace(
    capture_mode: str, live_url: str, app: App, openai_stub: OpenAIStub
) -> None:
    provider = openai.OpenAI(api_key="sk", base_url=f"{openai_stub.url}/v1", max_retries=0)

    @promptrail.observe(name="step")
    def step() -> None:
        provider.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )

    with app.tracer.start_as_current_span("request") as outer:
        step()
    provider.close()

    recorded = {r["span_name"]: r for r in fetch(live_url, 2)}
    context = outer.get_span_context()
    assert recorded["step"]["trace_id"] == f"{context.trace_id:032x}"
    assert recorded["step"]["parent_span_id"] == f"{context.span_id:016x}"
    call = recorded["chat gpt-4o-mini"]
    assert call["trace_id"] == recorded["step"]["trace_id"]
    assert call["parent_span_id"] == recorded["step"]["span_id"]


def test_joined_capture_also_reaches_the_applications_processors(
    capture_mode: str, live_url: str, app: App
) -> None:
    @promptrail.observe(name="joined-work")
    def work() -> int:
        return 1

    work()
    (record,) = fetch(live_url, 1)

    seen = [s for s in app.finished.get_finished_spans() if s.name == "joined-work"]
    if capture_mode == "joined":
        (span,) = seen
        assert f"{span.context.span_id:016x}" == record["span_id"]
    else:  # promptrail's own spans never reach the application's provider
        assert seen == []


def test_messages_appended_after_the_call_are_not_recorded(
    capture_mode: str, live_url: str, openai_stub: OpenAIStub
) -> None:
    provider = openai.OpenAI(api_key="sk", base_url=f"{openai_stub.url}/v1", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "first question"}]

    answer = provider.chat.completions.create(model="gpt-4o-mini", messages=messages)
    messages.append(answer.choices[0].message)
    messages.append({"role": "user", "content": "second question"})
    provider.close()

    (record,) = fetch(live_url, 1)
    assert record["input"] == [{"role": "user", "content": "first question"}]


def test_an_error_status_set_through_the_api_makes_an_error_record(
    capture_mode: str, live_url: str
) -> None:
    @promptrail.observe(name="graded")
    def graded() -> str:
        trace.get_current_span().set_status(Status(StatusCode.ERROR, "answer failed grading"))
        return "bad answer"

    assert graded() == "bad answer"

    (record,) = fetch(live_url, 1)
    assert record["status"] == "error"
    assert record["error"] == "answer failed grading"
    assert record["output"] == {"content": "bad answer"}


def test_a_response_that_cannot_be_read_still_gives_a_record(
    capture_mode: str, live_url: str
) -> None:
    def unreadable(record: CallRecord, response: Any) -> None:
        raise AttributeError("a response shape the reader does not know")

    call = CallRecord("openai", "chat", {"model": "gpt-4o-mini"}, [{"role": "user"}], list)
    call.done(unreadable, object())  # the application's call is not disturbed

    (record,) = fetch(live_url, 1)
    assert record["status"] == "success"
    assert record["provider"] == "openai"
    assert record["span_name"] == "chat gpt-4o-mini"
