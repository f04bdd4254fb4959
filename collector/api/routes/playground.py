"""Playground runs (docs/api-notes.md, "Playground"): a prompt tried on several inputs, models
and repetitions at once, nothing written to the registry.

Without ``stream`` the answer is ``data`` = the run and its cells; with ``stream: true`` it is
a ``text/event-stream`` of ``data: <json>`` events (start, chunk and end of each cell as they
come, done). Every client error, the estimate above ``max_cost_usd`` (402) among them, is a
plain JSON error, before anything is called.

``POST /playground/estimates`` takes the same body and answers the estimate that run would
make, and each cell's, calling no provider and writing nothing (the console shows it before
"Run all").
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter
from sse_starlette import EventSourceResponse

from ...models.envelopes import Data, ErrorBody
from ...models.playground import PlaygroundEstimateOut, PlaygroundRunIn, PlaygroundRunOut
from ..deps import Project, ServicesDep
from .runs import _PING_SECONDS

router = APIRouter(prefix="/playground", tags=["playground"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The run, or with `stream: true` a stream of server-sent events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    402: {"model": ErrorBody, "description": "BUDGET_EXCEEDED (details.estimated_usd)"},
}


@router.post("/runs", response_model=Data[PlaygroundRunOut], responses=_RESPONSES)
async def run_playground(
    body: PlaygroundRunIn, project: Project, services: ServicesDep
) -> Data[PlaygroundRunOut] | EventSourceResponse:
    """Run every cell (input x model x repetition), at most 8 at once."""
    playground = services.playground
    plan = await playground.plan(project, body)
    if plan.stream:
        return EventSourceResponse(_sse(playground.stream(plan)), ping=_PING_SECONDS, sep="\n")
    return Data(data=await playground.run(plan))


async def _sse(
    batches: AsyncGenerator[list[dict[str, Any]], None],
) -> AsyncGenerator[bytes, None]:
    """Write each batch of events in one piece, each event one ``data: <json>`` line and a
    blank line (the bytes the runs' stream writes for one event)."""
    async with aclosing(batches):
        async for batch in batches:
            yield b"".join(_event(event) for event in batch)


def _event(event: dict[str, Any]) -> bytes:
    # JSON escapes every line break in its strings: the event is a single data line.
    text = json.dumps(event, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


@router.post("/estimates", response_model=Data[PlaygroundEstimateOut])
async def estimate_playground(
    body: PlaygroundRunIn, project: Project, services: ServicesDep
) -> Data[PlaygroundEstimateOut]:
    """The estimate a run of this body would make, and each cell's; nothing is called or
    written, and ``max_cost_usd`` and ``stream`` are not applied."""
    return Data(data=await services.playground.estimate_run(project, body))
