"""LlamaIndex: its spans are the parents of the model call's record, in one trace.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/llamaindex_chat.py

Needs `pip install 'promptrail[llamaindex]' llama-index-core` and
`pip install --no-deps llama-index-llms-openai` (it declares openai<3; it works with 3.x).
PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini).
"""

from __future__ import annotations

import os

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument()  # openai, and LlamaIndex's dispatcher spans

llm = OpenAI(
    model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
    api_base=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
)
dispatcher = get_dispatcher(__name__)


@dispatcher.span
def answer(question: str) -> str:
    return str(llm.chat([ChatMessage(role="user", content=question)]).message.content)


with promptrail.context(user_id="ada"):
    print(answer("Say hello to promptrail in five words."))
promptrail.flush()
