"""``@promptrail.observe``: records for function calls, one trace for nested calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import Records


def by_name(recorded: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["span_name"]: r for r in recorded}


def test_function_call_becomes_a_record(records: Records) -> None:
    @promptrail.observe(metadata={"team": "care"}, exclude=["password"])
    def greet(name: str, password: str, *, punctuation: str = "!") -> str:
        return f"Hello {name}{punctuation}"

    assert greet("Ada", "hunter2") == "Hello Ada!"

    (record,) = records()
    assert record["span_name"].endswith("greet")
    assert record["input_variables"] == {"name": "Ada"}
    assert record["output"] == {"content": "Hello Ada!"}
    assert record["metadata"] == {"team": "care"}
    assert record["status"] == "success"
    assert record["kind"] == "span"  # an observed function is a span unless told


def test_observe_takes_the_kind_its_record_is(records: Records) -> None:
    @promptrail.observe(kind="agent")
    def plan() -> str:
        return tool()

    @promptrail.observe(kind="tool")
    def tool() -> str:
        return "done"

    assert plan() == "done"

    kinds = {r["span_name"].rsplit(".", 1)[-1]: r["kind"] for r in records(expected=2)}
    assert kinds == {"plan": "agent", "tool": "tool"}
    with pytest.raises(ValueError, match="kind must be one of"):
        promptrail.observe(kind="function")


def test_exceptions_make_an_error_record_and_propagate(records: Records) -> None:
    @promptrail.observe
    def broken() -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        broken()

    (record,) = records()
    assert record["status"] == "error"
    assert "ValueError: nope" in record["error"]


def test_nesting_builds_one_trace_and_passes_linkage_to_model_calls(
    openai_stub: OpenAIStub, records: Records
) -> None:
    openai_stub.reset()
    api = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)

    @promptrail.observe(name="inner")
    def inner(question: str) -> str:
        reply = api.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": question}]
        )
        return reply.choices[0].message.content or ""

    @promptrail.observe(name="outer", prompt_name="support", metadata={"user_id": "u1"})
    def outer() -> str:
        return inner("hi?")

    outer()
    api.close()

    spans = by_name(records(expected=3))
    call = spans["chat gpt-4o"]
    assert {r["trace_id"] for r in spans.values()} == {spans["outer"]["trace_id"]}
    assert spans["outer"]["parent_span_id"] is None
    assert spans["inner"]["parent_span_id"] == spans["outer"]["span_id"]
    assert call["parent_span_id"] == spans["inner"]["span_id"]
    assert call["prompt_name"] == "support"
    assert call["metadata"] == {"user_id": "u1"}
    assert spans["inner"]["prompt_name"] == "support"


def test_async_functions_and_generators(records: Records) -> None:
    @promptrail.observe
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    @promptrail.observe
    def words() -> Iterator[str]:
        yield "a "
        yield "b"

    @promptrail.observe
    async def numbers() -> AsyncIterator[int]:
        yield 1
        yield 2

    async def consume() -> list[int]:
        return [n async for n in numbers()]

    assert asyncio.run(double(21)) == 42
    assert list(words()) == ["a ", "b"]
    assert asyncio.run(consume()) == [1, 2]

    spans = by_name(records(expected=3))
    outputs = {name.rsplit(".", 1)[-1]: r["output"] for name, r in spans.items()}
    assert outputs == {
        "double": {"content": "42"},
        "words": {"content": "a b"},
        "numbers": {"content": "[1, 2]"},
    }


def test_a_generator_abandoned_half_way_is_recorded_without_error(records: Records) -> None:
    @promptrail.observe
    def letters() -> Iterator[str]:
        yield from "abcdef"

    iterator = letters()
    assert [next(iterator), next(iterator)] == ["a", "b"]
    iterator.close()

    (record,) = records()
    assert record["status"] == "success"
    assert record["output"] == {"content": "ab"}


def test_the_consumer_of_a_generator_is_not_inside_its_span(records: Records) -> None:
    @promptrail.observe(name="producer")
    def producer() -> Iterator[int]:
        yield 1
        yield 2

    @promptrail.observe(name="consumer_step")
    def step(value: int) -> int:
        return value

    for value in producer():
        step(value)

    spans = records(expected=3)
    producer_span = next(r for r in spans if r["span_name"] == "producer")
    steps = [r for r in spans if r["span_name"] == "consumer_step"]
    assert len(steps) == 2
    assert all(r["parent_span_id"] != producer_span["span_id"] for r in steps)


def test_a_new_trace_s_id_leads_with_its_start_so_record_ids_sort_by_time(
    records: Records,
) -> None:
    @promptrail.observe
    def step(n: int) -> int:
        return n

    window: list[tuple[int, int]] = []
    for n in range(3):
        before = time.time_ns() // 1_000_000
        step(n)
        window.append((before, time.time_ns() // 1_000_000))
        time.sleep(0.003)

    found = sorted(records(3), key=lambda r: r["input_variables"]["n"])
    for record, (before, after) in zip(found, window, strict=True):
        trace_id = int(record["trace_id"], 16)
        assert before <= trace_id >> 80 <= after  # its start in Unix ms
        assert record["id"] == f"req_{record['trace_id']}{record['span_id']}"
    ids = [record["id"] for record in found]
    assert ids == sorted(ids)  # later traces, later ids: the log's reads by id stay local
    # The low 64 bits (what sampling reads) stay random: three traces, three values.
    assert len({int(r["trace_id"], 16) & (1 << 64) - 1 for r in found}) == 3


def test_last_request_id_after_an_observed_function_is_its_model_call(
    openai_stub: OpenAIStub, records: Records
) -> None:
    # The README's feedback pattern: call an observed function, then score its model call.
    api = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)

    @promptrail.observe(name="answer")
    def answer(question: str) -> str:
        reply = api.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": question}]
        )
        return reply.choices[0].message.content or ""

    @promptrail.observe(name="handler", kind="chain")
    def handler() -> str:
        return answer("hi?")

    @promptrail.observe(name="after")
    def after() -> None:  # makes no model call: the last one stays the last one
        pass

    answer("capital of France?")
    single = promptrail.last_request_id()
    handler()
    nested = promptrail.last_request_id()
    after()
    unchanged = promptrail.last_request_id()
    api.close()

    found = records(expected=6)
    calls = sorted((r for r in found if r["kind"] == "llm"), key=lambda r: r["created_at"])
    assert [single, nested, unchanged] == [calls[0]["id"], calls[1]["id"], calls[1]["id"]]
    spans = by_name(found)
    assert calls[0]["parent_span_id"] in {r["span_id"] for r in found if r["span_name"] == "answer"}
    assert nested not in {spans["handler"]["id"], spans["after"]["id"]}


def test_last_request_id_after_an_observed_coroutine_is_its_model_call(
    openai_stub: OpenAIStub, records: Records
) -> None:
    @promptrail.observe(name="answer")
    async def answer(question: str) -> tuple[str, str | None]:
        async with openai.AsyncOpenAI(
            api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0
        ) as api:
            await api.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": question}]
            )
        return "done", promptrail.last_request_id()

    async def handle() -> tuple[str | None, str | None]:
        _, inside = await answer("hi?")
        return inside, promptrail.last_request_id()

    inside, after = asyncio.run(handle())

    (call,) = [r for r in records(expected=2) if r["kind"] == "llm"]
    assert inside == after == call["id"]
