"""The LangChain and LangGraph pieces of tests/integrations/test_langchain.py.

That module reaches them through its ``lc`` fixture, which imports this module on first use:
every test worker collects every test module, and importing LangChain, LangGraph and their
OpenAI and Anthropic packages at a module's top cost each worker seconds of CPU, used only
where these tests run (docs/architecture.md, "Tests").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from promptrail.testing import OpenAIStub

__all__ = [
    "END",
    "PROMPT",
    "START",
    "ChatAnthropic",
    "ChatOpenAI",
    "Command",
    "InMemorySaver",
    "RunnableLambda",
    "Shelf",
    "StateGraph",
    "StrOutputParser",
    "async_model",
    "chat_openai",
    "interrupt",
    "lookup",
]

PROMPT = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])


def chat_openai(stub: OpenAIStub, **options: Any) -> ChatOpenAI:
    """A LangChain OpenAI chat model of the stub, without retries."""
    return ChatOpenAI(  # type: ignore[call-arg]
        model="gpt-4o", api_key="k", base_url=f"{stub.url}/v1", max_retries=0, **options
    )


@asynccontextmanager
async def async_model(stub: OpenAIStub) -> AsyncIterator[ChatOpenAI]:
    """A model with its own async connections, closed on this event loop.

    (langchain-openai otherwise shares one async client per process, whose connections
    outlive the event loop of each ``asyncio.run``.)
    """
    client = openai.DefaultAsyncHttpxClient()
    try:
        yield chat_openai(stub, http_async_client=client)
    finally:
        await client.aclose()


@tool
def lookup(topic: str) -> str:
    """Look up a fact."""
    return f"facts about {topic}"


class Shelf(BaseRetriever):
    """A retriever over a fixed list of documents."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=f"{query} live in rivers", metadata={"source": "atlas"})]
