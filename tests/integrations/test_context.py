"""``promptrail.context``: the user, session and metadata of every record captured inside."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import Records
from tests.keys import DEFAULT_KEY


@pytest.fixture
def openai_client(openai_stub: OpenAIStub) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)
    yield client
    client.close()


def ask(openai_client: openai.OpenAI, question: str) -> None:
    openai_client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}]
    )


def by_question(recorded: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Model-call records by the text of their one message."""
    return {r["input"][0]["content"]: r for r in recorded if r["span_name"] == "chat gpt-4o"}


def test_calls_inside_carry_user_session_and_metadata_and_the_filter_finds_them(
    openai_client: openai.OpenAI, records: Records, capture: str
) -> None:
    with promptrail.context(user_id="u1", session_id="s1", metadata={"plan": "pro"}):
        ask(openai_client, "inside")
    ask(openai_client, "after")

    recorded = by_question(records(expected=2))
    assert recorded["inside"]["metadata"] == {"user_id": "u1", "session_id": "s1", "plan": "pro"}
    assert recorded["after"]["metadata"] == {}
    with httpx.Client(
        base_url=capture, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}
    ) as client:
        found = client.get("/v1/requests", params={"metadata.user_id": "u1"}).json()["data"]
    assert [r["id"] for r in found] == [recorded["inside"]["id"]]


def test_nested_contexts_merge_innermost_wins_and_observe_inherits(
    openai_client: openai.OpenAI, records: Records
) -> None:
    @promptrail.observe(name="step", metadata={"team": "care"})
    def step() -> None:
        ask(openai_client, "nested")

    with promptrail.context(user_id="u1", session_id="s1", metadata={"plan": "pro"}):
        with promptrail.context(user_id="u2", metadata={"plan": "free", "page": "home"}):
            step()
        ask(openai_client, "outer again")

    recorded = records(expected=3)
    calls = by_question(recorded)
    inner = {"user_id": "u2", "session_id": "s1", "plan": "free", "page": "home"}
    assert calls["nested"]["metadata"] == {**inner, "team": "care"}
    (observed,) = (r for r in recorded if r["span_name"] == "step")
    assert observed["metadata"] == {**inner, "team": "care"}
    assert calls["outer again"]["metadata"] == {"user_id": "u1", "session_id": "s1", "plan": "pro"}


def test_explicit_user_and_session_win_over_the_same_keys_in_metadata(
    openai_client: openai.OpenAI, records: Records
) -> None:
    with promptrail.context(user_id="u1", metadata={"user_id": "other", "session_id": "s7"}):
        ask(openai_client, "q")

    (record,) = records()
    assert record["metadata"] == {"user_id": "u1", "session_id": "s7"}


def test_decorated_functions_and_concurrent_tasks_keep_their_own_user(
    openai_client: openai.OpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    @promptrail.context(session_id="sync")
    def sync_call(question: str) -> None:
        ask(openai_client, question)

    async_api = openai.AsyncOpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)
    openai_stub.script.first_byte_delay = 0.05  # the tasks' calls overlap on the event loop

    async def user_turn(user: str) -> None:
        @promptrail.context(user_id=user)
        async def answer() -> None:
            await async_api.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"from {user}"}]
            )

        await answer()

    async def main() -> None:
        await asyncio.gather(*(user_turn(f"user-{i}") for i in range(5)))
        await async_api.close()

    sync_call("decorated")
    asyncio.run(main())

    calls = by_question(records(expected=6))
    assert calls["decorated"]["metadata"] == {"session_id": "sync"}
    for i in range(5):
        assert calls[f"from user-{i}"]["metadata"] == {"user_id": f"user-{i}"}


def test_threads_run_in_a_copied_context_inherit_it_others_do_not(
    openai_client: openai.OpenAI, records: Records
) -> None:
    async def in_worker_thread() -> None:
        async with promptrail.context(user_id="u-async"):
            await asyncio.to_thread(ask, openai_client, "to_thread")

    with promptrail.context(user_id="u-main"):
        copied = contextvars.copy_context()
        plain = threading.Thread(target=ask, args=(openai_client, "plain thread"))
        plain.start()
        plain.join()
    worker = threading.Thread(target=copied.run, args=(ask, openai_client, "copied context"))
    worker.start()
    worker.join()
    asyncio.run(in_worker_thread())

    calls = by_question(records(expected=3))
    assert calls["copied context"]["metadata"] == {"user_id": "u-main"}
    assert calls["to_thread"]["metadata"] == {"user_id": "u-async"}
    assert calls["plain thread"]["metadata"] == {}


def test_the_context_ends_with_its_block_even_when_it_raises(
    openai_client: openai.OpenAI, records: Records
) -> None:
    @promptrail.context(user_id="u1")
    def broken() -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        broken()
    with pytest.raises(KeyError), promptrail.context(user_id="u2"):
        raise KeyError("x")
    ask(openai_client, "after")

    (record,) = records()
    assert record["metadata"] == {}


def test_generator_functions_are_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match="inside it instead"):

        @promptrail.context(user_id="u1")
        def items() -> Iterator[int]:
            yield 1
