"""A FastAPI chat endpoint that returns its answer with a feedback URL, and a browser using it.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/feedback_fastapi.py          # serves, chats, votes thumbs-down

The endpoint's model call is captured by promptrail; the answer carries a feedback URL made
in the process (``promptrail.feedback_token``: no round trip) for that call's record. The
"browser" posts a thumbs-down with a correction to it with no API key, as a chat widget would.
Your code can score the same record too (``promptrail.score``), here a check of its own.
PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini).
"""

from __future__ import annotations

import os
import threading

import httpx
import openai
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument("openai")
COLLECTOR = os.environ.get("PROMPTRAIL_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

app = FastAPI()
client = openai.AsyncOpenAI()


class Question(BaseModel):
    message: str


@app.post("/chat")
async def chat(question: Question) -> dict[str, str]:
    reply = await client.chat.completions.create(
        model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
        messages=[{"role": "user", "content": question.message}],
    )
    answer = reply.choices[0].message.content or ""
    request_id = promptrail.last_request_id()  # the record of the call just made
    # A check of your own, scored from code: queued, sent in the background, never raises.
    promptrail.score("non_empty", bool(answer.strip()), request_id=request_id)
    # One vote of "thumbs" on this record, for a day; the browser needs no key.
    token = promptrail.feedback_token("thumbs", request_id=request_id, ttl_seconds=86_400)
    return {
        "answer": answer,
        "request_id": str(request_id),
        "feedback_url": f"{COLLECTOR}/v1/feedback/{token}",
    }


if __name__ == "__main__":
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.05)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    chat_answer = httpx.post(f"{url}/chat", json={"message": "What is the capital of France?"})
    data = chat_answer.json()
    print("answer:", data["answer"])

    # The browser: no API key, just the URL it was given (CORS allows any origin).
    vote = httpx.post(
        data["feedback_url"],
        json={"value": False, "comment": "Not what I asked", "correction": "Paris."},
        headers={"Origin": "https://chat.example"},
    )
    vote.raise_for_status()
    print("vote:", vote.json()["data"]["source"], vote.json()["data"]["value"])

    server.should_exit = True
    thread.join()
    promptrail.flush()
    with promptrail.Client() as api:
        for score in api.scores.list(request_id=data["request_id"]):
            print(f"score {score.name}={score.value} ({score.source}) {score.correction or ''}")
