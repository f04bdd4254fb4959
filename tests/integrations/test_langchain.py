"""LangChain and LangGraph, driven for real against the wire stubs and a live collector.

LangChain's names come from the ``lc`` fixture (tests/integrations/langchain_parts.py), not
from imports at this module's top: every test worker collects this module, and only the one
that runs these tests should pay for importing LangChain (docs/architecture.md, "Tests").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import promptrail
from promptrail import _runtime
from promptrail.testing import AnthropicStub, OpenAIStub
from tests.capture import Records, fetch_records
from tests.keys import DEFAULT_KEY
from tests.provider_clients import openai_client

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

REPLY = "Hello from the stub provider."


@pytest.fixture(scope="module")
def lc() -> ModuleType:
    """The LangChain and LangGraph names and pieces these tests use, imported on first use."""
    from tests.integrations import langchain_parts

    return langchain_parts


@pytest.fixture
def model(lc: ModuleType, openai_stub: OpenAIStub) -> ChatOpenAI:
    made: ChatOpenAI = lc.chat_openai(openai_stub)
    return made


def model_calls(recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recorded if r["model"]]


def named(recorded: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = (r for r in recorded if r["span_name"] == name)
    return found


def test_a_chain_is_one_trace_with_one_record_per_provider_call(
    lc: ModuleType, model: ChatOpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    chain = lc.PROMPT | model | lc.StrOutputParser()

    with promptrail.context(user_id="u1", session_id="s1"):
        assert chain.invoke({"question": "Hi?"}) == REPLY

    recorded = records(expected=4)
    assert len(openai_stub.calls) == 1
    (call,) = model_calls(recorded)  # the openai patch stood aside: no second copy
    sequence = named(recorded, "RunnableSequence")
    assert {r["span_name"] for r in recorded} == {
        "RunnableSequence",
        "ChatPromptTemplate",
        "chat gpt-4o",
        "StrOutputParser",
    }
    assert {r["trace_id"] for r in recorded} == {sequence["trace_id"]}
    assert sequence["parent_span_id"] is None
    assert all(r["parent_span_id"] == sequence["span_id"] for r in recorded if r is not sequence)
    assert call["provider"] == "openai"
    assert call["model"] == "gpt-4o"
    assert call["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi?"},
    ]
    assert call["output"]["content"] == REPLY
    assert call["usage"]["completion_tokens"] == len(REPLY.split())
    assert call["usage"]["prompt_tokens"] > 0
    assert sequence["input_variables"] == {"question": "Hi?"}
    assert all(r["metadata"] == {"user_id": "u1", "session_id": "s1"} for r in recorded)
    # The model call is the one llm record; the runs around it are chains (docs/api-notes.md,
    # "Traces, sessions and users").
    assert {r["span_name"]: r["kind"] for r in recorded} == {
        "RunnableSequence": "chain",
        "ChatPromptTemplate": "chain",
        "chat gpt-4o": "llm",
        "StrOutputParser": "chain",
    }


@pytest.fixture
def joined_records(live_url: str) -> Iterator[Records]:
    """promptrail joined to the application's OpenTelemetry SDK provider (SDK spans)."""
    _runtime.reset_stats()
    provider = TracerProvider()
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05, tracer_provider=provider
    )
    promptrail.instrument()
    yield lambda expected=1: fetch_records(live_url, expected)
    promptrail.uninstrument()
    promptrail.shutdown()
    provider.shutdown()


def test_on_the_applications_sdk_spans_the_records_are_the_same(
    lc: ModuleType, model: ChatOpenAI, joined_records: Records
) -> None:
    with promptrail.context(user_id="u1"):
        (lc.PROMPT | model | lc.StrOutputParser()).invoke({"question": "Hi?"})

    recorded = joined_records(expected=4)
    sequence = named(recorded, "RunnableSequence")
    (call,) = model_calls(recorded)
    assert len(recorded) == 4
    assert call["parent_span_id"] == sequence["span_id"]
    assert (call["model"], call["output"]["content"]) == ("gpt-4o", REPLY)
    assert call["input"][-1] == {"role": "user", "content": "Hi?"}
    assert call["usage"]["completion_tokens"] == len(REPLY.split())
    assert sequence["input_variables"] == {"question": "Hi?"}
    assert sequence["output"] == {"content": REPLY}
    assert all(r["metadata"] == {"user_id": "u1"} for r in recorded)


def test_stream_and_astream_record_time_to_first_token(
    lc: ModuleType, model: ChatOpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    streamed = "".join(str(chunk.content) for chunk in model.stream("one"))

    async def astream() -> str:
        async with lc.async_model(openai_stub) as chat:
            return "".join([str(chunk.content) async for chunk in chat.astream("two")])

    assert streamed == asyncio.run(astream()) == REPLY

    calls = model_calls(records(expected=2))
    assert len(calls) == 2
    for call in calls:
        assert call["output"]["content"] == REPLY
        assert call["time_to_first_token_ms"] is not None
        assert call["parent_span_id"] is None


def test_ainvoke_and_batch_each_call_recorded_once_in_its_own_context(
    lc: ModuleType, model: ChatOpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    async def ainvoke() -> None:
        async with lc.async_model(openai_stub) as chat, promptrail.context(user_id="async-user"):
            await chat.ainvoke("async question")

    asyncio.run(ainvoke())
    with promptrail.context(user_id="batch-user"):
        replies = model.batch(["b1", "b2", "b3"])
    assert [r.content for r in replies] == [REPLY] * 3

    calls = model_calls(records(expected=4))
    assert len(calls) == len(openai_stub.calls) == 4
    users = sorted((c["input"][0]["content"], c["metadata"]["user_id"]) for c in calls)
    assert users == [
        ("async question", "async-user"),
        ("b1", "batch-user"),
        ("b2", "batch-user"),
        ("b3", "batch-user"),
    ]


def test_a_failing_call_is_an_error_record_and_the_error_reaches_the_caller(
    model: ChatOpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    openai_stub.script.failures = [500]
    with pytest.raises(Exception, match="500"):
        model.invoke("doomed")

    (call,) = records()
    assert call["status"] == "error"
    assert "500" in call["error"]


def test_chat_anthropic_is_recorded_once(
    lc: ModuleType, anthropic_stub: AnthropicStub, records: Records
) -> None:
    chat = lc.ChatAnthropic(
        model_name="claude-stub-model",
        max_tokens=100,
        api_key="k",  # type: ignore[arg-type]
        base_url=anthropic_stub.url,
        max_retries=0,
        timeout=10,
        stop=None,
    )

    assert chat.invoke("Hi?").content == REPLY

    (call,) = records()
    assert len(anthropic_stub.calls) == 1
    assert (call["provider"], call["model"]) == ("anthropic", "claude-stub-model")
    assert call["output"]["content"] == REPLY
    assert call["usage"]["completion_tokens"] == len(REPLY.split())


class State(TypedDict, total=False):
    question: str
    facts: str
    answer: str


def test_a_langgraph_run_nests_nodes_tools_and_model_calls_in_one_trace(
    lc: ModuleType, model: ChatOpenAI, records: Records
) -> None:
    def research(state: State) -> State:
        return {"facts": lc.lookup.invoke({"topic": state["question"]})}

    def answer(state: State) -> State:
        reply = model.invoke(f"{state['facts']}: {state['question']}")
        return {"answer": str(reply.content)}

    graph = lc.StateGraph(State)
    graph.add_node("research", research)
    graph.add_node("answer", answer)
    graph.add_edge(lc.START, "research")
    graph.add_edge("research", "answer")
    graph.add_edge("answer", lc.END)

    with promptrail.context(user_id="graph-user"):
        result = graph.compile().invoke({"question": "otters"})
    assert result["answer"] == REPLY

    recorded = records(expected=5)
    root = named(recorded, "LangGraph")
    research_node, answer_node = named(recorded, "research"), named(recorded, "answer")
    (call,) = model_calls(recorded)
    assert {r["trace_id"] for r in recorded} == {root["trace_id"]}
    assert research_node["parent_span_id"] == answer_node["parent_span_id"] == root["span_id"]
    assert named(recorded, "lookup")["parent_span_id"] == research_node["span_id"]
    assert named(recorded, "lookup")["output"]["content"] == "facts about otters"
    assert call["parent_span_id"] == answer_node["span_id"]
    assert call["input"] == [{"role": "user", "content": "facts about otters: otters"}]
    assert root["input_variables"] == {"question": "otters"}
    assert root["output"] == {"question": "otters", "facts": "facts about otters", "answer": REPLY}
    assert all(r["metadata"] == {"user_id": "graph-user"} for r in recorded)
    assert (root["kind"], research_node["kind"], call["kind"]) == ("chain", "chain", "llm")
    assert named(recorded, "lookup")["kind"] == "tool"


def test_inside_an_observed_function_the_run_joins_its_trace(
    model: ChatOpenAI, records: Records
) -> None:
    @promptrail.observe(name="handle")
    def handle() -> str:
        return str(model.invoke("q").content)

    handle()

    recorded = records(expected=2)
    outer, call = named(recorded, "handle"), named(recorded, "chat gpt-4o")
    assert call["parent_span_id"] == outer["span_id"]


def test_uninstrumented_langchain_leaves_the_call_to_the_openai_patch(
    lc: ModuleType, model: ChatOpenAI, records: Records
) -> None:
    promptrail.uninstrument("langchain")
    (lc.PROMPT | model).invoke({"question": "plain?"})

    (call,) = records()  # the provider call only: no chain spans
    assert call["span_name"] == "chat gpt-4o"
    assert call["input"][-1] == {"role": "user", "content": "plain?"}


def test_a_retriever_is_a_parent_span_with_its_documents(
    lc: ModuleType, model: ChatOpenAI, records: Records
) -> None:
    chain = lc.Shelf() | (lambda docs: docs[0].page_content) | model

    chain.invoke("otters")

    recorded = records(expected=4)
    shelf, sequence = named(recorded, "Shelf"), named(recorded, "RunnableSequence")
    (call,) = model_calls(recorded)
    assert shelf["parent_span_id"] == call["parent_span_id"] == sequence["span_id"]
    assert shelf["input_variables"] == {"query": "otters"}
    assert (shelf["kind"], sequence["kind"], call["kind"]) == ("retriever", "chain", "llm")
    assert shelf["output"]["content"] == (
        '[{"page_content": "otters live in rivers", "metadata": {"source": "atlas"}}]'
    )
    assert call["input"] == [{"role": "user", "content": "otters live in rivers"}]


def one_node_graph(lc: ModuleType, node: Any) -> Any:
    """A graph of one node, ``approve``, with a checkpointer (an interrupt needs one)."""
    graph = lc.StateGraph(State)
    graph.add_node("approve", node)
    graph.add_edge(lc.START, "approve")
    graph.add_edge("approve", lc.END)
    return graph.compile(checkpointer=lc.InMemorySaver())


def test_a_langgraph_interrupt_is_control_flow_not_an_error(
    lc: ModuleType, records: Records
) -> None:
    def approve(state: State) -> State:
        return {"answer": str(lc.interrupt(f"approve {state['question']}?"))}

    app = one_node_graph(lc, approve)
    config: Any = {"configurable": {"thread_id": "t1"}}

    paused = app.invoke({"question": "otters"}, config)
    assert [i.value for i in paused["__interrupt__"]] == ["approve otters?"]
    paused_records = records(expected=2)
    assert app.invoke(lc.Command(resume="yes"), config)["answer"] == "yes"

    recorded = records(expected=4)
    assert len(paused_records) == 2 and len(recorded) == 4
    assert [(r["status"], r["error"]) for r in recorded] == [("success", None)] * 4
    stopped = named(paused_records, "approve")
    assert stopped["output"] == {"__interrupt__": ["approve otters?"]}
    assert named(paused_records, "LangGraph")["output"]["question"] == "otters"


@promptrail.observe(name="look_up")
def look_up(topic: str) -> str:
    return f"facts about {topic}"


def test_a_runs_span_is_current_inside_it(
    lc: ModuleType, openai_stub: OpenAIStub, records: Records
) -> None:
    client = openai_client(openai_stub)

    def research(topic: str) -> str:
        facts = look_up(topic)  # neither knows about LangChain: they nest under the run
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": facts}]
        )
        return facts

    assert lc.RunnableLambda(research).invoke("otters") == "facts about otters"
    assert trace.get_current_span() is trace.INVALID_SPAN  # the run left nothing behind

    recorded = records(expected=3)
    run = named(recorded, "research")
    assert run["parent_span_id"] is None
    for record in (named(recorded, "look_up"), named(recorded, "chat gpt-4o")):
        assert (record["trace_id"], record["parent_span_id"]) == (run["trace_id"], run["span_id"])
    assert named(recorded, "chat gpt-4o")["input"] == [
        {"role": "user", "content": "facts about otters"}
    ]


def test_a_failing_run_stops_being_current(lc: ModuleType, records: Records) -> None:
    def fail(_: str) -> str:
        raise ValueError("no otters")

    with pytest.raises(ValueError, match="no otters"):
        lc.RunnableLambda(fail).invoke("x")
    assert trace.get_current_span() is trace.INVALID_SPAN
    look_up("after")

    recorded = records(expected=2)
    assert named(recorded, "fail")["status"] == "error"
    assert named(recorded, "look_up")["parent_span_id"] is None


def test_async_runs_are_current_in_their_own_tasks_without_detach_errors(
    lc: ModuleType, openai_stub: OpenAIStub, records: Records, caplog: pytest.LogCaptureFixture
) -> None:
    openai_stub.script.first_byte_delay = 0.05  # the two runs overlap

    import openai

    async def main() -> None:
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)

        async def ask(topic: str) -> str:
            facts = look_up(topic)
            message = {"role": "user", "content": facts}
            await client.chat.completions.create(model="gpt-4o", messages=[message])
            return facts

        async with client:
            runs = [lc.RunnableLambda(ask, name=f"ask {t}").ainvoke(t) for t in ("a", "b")]
            assert await asyncio.gather(*runs) == ["facts about a", "facts about b"]
            # LangChain ends an async run in a task of its own: what the run left current
            # here now stands for the span before it (none), not for the ended run.
            assert not trace.get_current_span().get_span_context().is_valid
            look_up("after")

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    recorded = records(expected=7)
    for topic in ("a", "b"):
        run = named(recorded, f"ask {topic}")
        nested = [r for r in recorded if r["parent_span_id"] == run["span_id"]]
        assert sorted(r["span_name"] for r in nested) == ["chat gpt-4o", "look_up"]
        assert {r["trace_id"] for r in nested} == {run["trace_id"]}
        call = named(nested, "chat gpt-4o")
        assert call["input"] == [{"role": "user", "content": f"facts about {topic}"}]
    after = [r for r in recorded if r["span_name"] == "look_up" and r["parent_span_id"] is None]
    assert [r["input_variables"] for r in after] == [{"topic": "after"}]


def test_an_async_interrupt_is_no_error_and_leaves_no_run_current(
    lc: ModuleType, records: Records
) -> None:
    async def approve(state: State) -> State:
        return {"answer": str(lc.interrupt("approve?"))}

    app = one_node_graph(lc, approve)
    config: Any = {"configurable": {"thread_id": "t2"}}

    async def main() -> None:
        paused = await app.ainvoke({"question": "otters"}, config)
        assert [i.value for i in paused["__interrupt__"]] == ["approve?"]
        assert not trace.get_current_span().get_span_context().is_valid

    asyncio.run(main())

    recorded = records(expected=2)
    assert [(r["status"], r["error"]) for r in recorded] == [("success", None)] * 2
    assert named(recorded, "approve")["output"] == {"__interrupt__": ["approve?"]}


def test_a_stream_left_early_stops_being_current(lc: ModuleType, records: Records) -> None:
    def count(_: str) -> Iterator[str]:
        yield from ("one", "two", "three")

    chain = lc.RunnableLambda(lambda text: text) | lc.RunnableLambda(count)
    for chunk in chain.stream("go"):
        assert chunk == "one"
        break
    assert trace.get_current_span() is trace.INVALID_SPAN
    look_up("after")

    recorded = records(expected=4)
    assert named(recorded, "look_up")["parent_span_id"] is None
