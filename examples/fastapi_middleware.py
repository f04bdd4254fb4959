"""A FastAPI app under promptrail's middleware: each request's user on its records.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/fastapi_middleware.py        # serves, calls itself as two users

or serve it: `.venv/bin/uvicorn examples.fastapi_middleware:app` and
`curl -H 'X-User-Id: ada' http://127.0.0.1:8000/ask?q=hi` (with the collector on another port).
PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini).
"""

from __future__ import annotations

import os
import threading

import httpx
import openai
import uvicorn
from fastapi import FastAPI

import promptrail
from promptrail.integrations.middleware import ASGIContextMiddleware

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument("openai")

app = FastAPI()
# user_id from X-User-Id, session_id from X-Session-Id, request_id, route: on every record
app.add_middleware(ASGIContextMiddleware)
client = openai.AsyncOpenAI()


@app.get("/ask")
async def ask(q: str) -> dict[str, str]:
    reply = await client.chat.completions.create(
        model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
        messages=[{"role": "user", "content": q}],
    )
    return {"answer": reply.choices[0].message.content or ""}


if __name__ == "__main__":
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.05)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    for user in ("ada", "grace"):
        answer = httpx.get(f"{url}/ask", params={"q": "Say hello"}, headers={"X-User-Id": user})
        print(user, answer.json()["answer"])
    server.should_exit = True
    thread.join()
    promptrail.flush()
