"""Runs (spec 4.3, 6): run a stored prompt by latest version, number or label.

Without ``stream`` the answer is ``data`` = run result; with ``stream: true`` it is a
``text/event-stream`` of ``data: <json>`` events (start, chunk..., end or error).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter
from sse_starlette import EventSourceResponse, JSONServerSentEvent

from ...models.envelopes import Data, ErrorBody
from ...models.runs import RunRequest, RunResult
from ...services.runs import RunTarget
from ..deps import Project, ServicesDep
from .versions import VersionNumber

router = APIRouter(prefix="/prompts/{id}", tags=["runs"])

# The body is optional: a prompt without variables runs with none.
_EMPTY = RunRequest()
# Keep-alive comments through proxies while a slow model thinks.
_PING_SECONDS = 15

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The run result, or with `stream: true` a stream of server-sent events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    502: {"model": ErrorBody, "description": "PROVIDER_ERROR (details.request_id: the record)"},
}


async def _run(
    services: ServicesDep, project: str, target: RunTarget, body: RunRequest
) -> Data[RunResult] | EventSourceResponse:
    runs = services.runs
    run = await runs.prepare(project, target, body)
    if run.stream:
        return EventSourceResponse(_sse(runs.stream(run)), ping=_PING_SECONDS, sep="\n")
    return Data(data=await runs.complete(run))


async def _sse(
    events: AsyncGenerator[dict[str, Any], None],
) -> AsyncGenerator[JSONServerSentEvent, None]:
    """Write each event as one ``data: <json>`` line and a blank line."""
    async with aclosing(events):
        async for event in events:
            yield JSONServerSentEvent(event, sep="\n")


@router.post("/run", response_model=Data[RunResult], responses=_RESPONSES)
async def run_latest(
    id: str, project: Project, services: ServicesDep, body: RunRequest = _EMPTY
) -> Data[RunResult] | EventSourceResponse:
    """Run the newest version."""
    return await _run(services, project, RunTarget(id), body)


@router.post("/versions/{version}/run", response_model=Data[RunResult], responses=_RESPONSES)
async def run_version(
    id: str,
    version: VersionNumber,
    project: Project,
    services: ServicesDep,
    body: RunRequest = _EMPTY,
) -> Data[RunResult] | EventSourceResponse:
    """Run a numbered version."""
    return await _run(services, project, RunTarget(id, number=version), body)


@router.post("/versions/by-label/{label}/run", response_model=Data[RunResult], responses=_RESPONSES)
async def run_label(
    id: str,
    label: str,
    project: Project,
    services: ServicesDep,
    body: RunRequest = _EMPTY,
) -> Data[RunResult] | EventSourceResponse:
    """Run the version carrying a label (``latest``: the newest)."""
    return await _run(services, project, RunTarget(id, label=label), body)
