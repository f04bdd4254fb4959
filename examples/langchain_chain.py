"""LangChain and LangGraph: a chain and a graph, each one trace, one record per model call.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/langchain_chain.py

Needs `pip install 'promptrail[langchain]' langchain-openai langgraph`.
PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini).
"""

from __future__ import annotations

import os
from typing import TypedDict

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument()  # openai, and LangChain: every run below is captured

model = ChatOpenAI(model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"))
prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])
chain = prompt | model | StrOutputParser()


class State(TypedDict, total=False):
    question: str
    answer: str


def answer(state: State) -> State:
    return {"answer": chain.invoke({"question": state["question"]})}


graph = StateGraph(State)
graph.add_node("answer", answer)
graph.add_edge(START, "answer")
graph.add_edge("answer", END)

# Every record below carries user_id and session_id (filter: metadata.user_id=ada).
with promptrail.context(user_id="ada", session_id="example"):
    print(chain.invoke({"question": "Say hello to promptrail in five words."}))
    print(graph.compile().invoke({"question": "And goodbye?"})["answer"])
promptrail.flush()
