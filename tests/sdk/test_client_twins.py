"""The sync and async clients agree: the same cache states and answers give the same template;
every resource's async twin takes the same arguments, and the same score calls give the same
answers.

Each case is a sequence of ``prompts.template()`` calls on a real collector, with what the
collector answers to the template requests each call causes (outages are put in at the wire).
The sequence runs once through :class:`promptrail.Client` and once through
:class:`promptrail.AsyncClient`, each on a prompt of its own; step by step, both must give the
expected answer (the template version served, or the error raised) after the same number of
template requests.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import promptrail
from promptrail import _resources as resources
from tests.keys import DEFAULT_KEY

pytestmark = pytest.mark.anyio

# What the collector answers to one template request.
OK = "ok"  # the real collector's answer
DOWN = "down"  # the connection is refused
FAILING = "503"  # the collector answers 5xx
GONE = "404"  # the prompt is not there (any more)
# Not an answer: before this request is answered, another caller of the same client fetches the
# template (taking the next answer in the script), then this request takes the one after.
ELSEWHERE = "another caller fetches it meanwhile"

FALLBACK = "Hello {{name}} (fallback)"

Answer = tuple[str, int]  # (version served as "v<n>" or the error's class, template requests sent)


@dataclass(frozen=True)
class Step:
    """One ``template()`` call, and the collector's answers to the requests it causes."""

    answers: tuple[str, ...] = ()  # in order; any further request gets OK
    ttl: float | None = None
    fallback: str | None = None
    publish: bool = False  # before the call, a new version is made through another client

    @property
    def options(self) -> dict[str, Any]:
        """Return the keyword arguments of the ``template()`` call."""
        return {"ttl": self.ttl, "fallback": self.fallback}


CASES: dict[str, tuple[list[Step], list[Answer]]] = {
    "nothing cached: fetch": ([Step()], [("v1", 1)]),
    "a fresh copy is served without a request": ([Step(), Step()], [("v1", 1), ("v1", 0)]),
    "an expired copy is served while a refresh fetches the new version": (
        [Step(ttl=0), Step(ttl=0, publish=True), Step(ttl=0)],
        [("v1", 1), ("v1", 1), ("v2", 1)],
    ),
    "a refresh that finds the collector down keeps the copy another TTL": (
        [Step(ttl=0), Step(answers=(DOWN,)), Step()],
        [("v1", 1), ("v1", 1), ("v1", 0)],
    ),
    "a refresh answered 5xx keeps the copy another TTL": (
        [Step(ttl=0), Step(answers=(FAILING,)), Step()],
        [("v1", 1), ("v1", 1), ("v1", 0)],
    ),
    "nothing cached and the collector down: the error": (
        [Step(answers=(DOWN,))],
        [("APIConnectionError", 1)],
    ),
    "nothing cached and a 5xx: the error": ([Step(answers=(FAILING,))], [("PromptrailError", 1)]),
    "nothing cached and a 404: the error": ([Step(answers=(GONE,))], [("NotFoundError", 1)]),
    "nothing cached and the collector down: the fallback": (
        [Step(answers=(DOWN,), fallback=FALLBACK)],
        [("v0", 1)],
    ),
    "nothing cached and a 404: the fallback": (
        [Step(answers=(GONE,), fallback=FALLBACK)],
        [("v0", 1)],
    ),
    "a fresh copy wins over the fallback": (
        [Step(), Step(answers=(DOWN,), fallback=FALLBACK)],
        [("v1", 1), ("v1", 0)],
    ),
    "a copy fetched meanwhile, then the collector down: the copy": (
        [Step(answers=(ELSEWHERE, OK, DOWN))],
        [("v1", 2)],
    ),
    "a copy fetched meanwhile, then the collector down: the copy, not the fallback": (
        [Step(answers=(ELSEWHERE, OK, DOWN), fallback=FALLBACK)],
        [("v1", 2)],
    ),
    "a copy fetched meanwhile, then a 404: the 404, not the fallback": (
        [Step(answers=(ELSEWHERE, OK, GONE), fallback=FALLBACK)],
        [("NotFoundError", 2)],
    ),
}


@dataclass
class Script:
    """The answers still to give to template requests, and how many requests were sent."""

    answers: deque[str] = field(default_factory=deque)
    sent: int = 0

    def next(self, request: httpx.Request) -> str:
        """Return the answer to ``request`` (OK for anything but a template request)."""
        if not request.url.path.endswith("/template"):
            return OK
        self.sent += 1
        return self.answers.popleft() if self.answers else OK


def failure(answer: str) -> httpx.Response:
    """Return (or raise, for DOWN) the collector's failing answer."""
    if answer == DOWN:
        raise httpx.ConnectError("connection refused (scripted)")
    if answer == FAILING:
        return httpx.Response(503, json={"error": {"code": "STORE_UNAVAILABLE"}})
    error = {"type": "not_found_error", "code": "PROMPT_NOT_FOUND", "message": "gone"}
    return httpx.Response(404, json={"error": {**error, "details": {}}})


class SyncWire(httpx.BaseTransport):
    """The real collector, answering template requests as the script says."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.elsewhere: Callable[[], object] = lambda: None
        self.real = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.script.next(request)
        if answer == ELSEWHERE:
            self.elsewhere()
            answer = self.script.answers.popleft()
        return self.real.handle_request(request) if answer == OK else failure(answer)

    def close(self) -> None:
        self.real.close()


class AsyncWire(httpx.AsyncBaseTransport):
    """The real collector, answering template requests as the script says (async)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.elsewhere: Callable[[], Awaitable[object]] = asyncio.sleep
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.script.next(request)
        if answer == ELSEWHERE:
            await self.elsewhere()
            answer = self.script.answers.popleft()
        return await self.real.handle_async_request(request) if answer == OK else failure(answer)

    async def aclose(self) -> None:
        await self.real.aclose()


async def play(
    ask: Callable[[Step], Awaitable[str]],
    script: Script,
    publisher: promptrail.Client,
    name: str,
    steps: list[Step],
) -> list[Answer]:
    """Create prompt ``name``, then take the steps; return what each gave and cost."""
    publisher.prompts.create(name, "Hello {name}.", "gpt-4o-mini")
    answers: list[Answer] = []
    for step in steps:
        if step.publish:  # through another client, so the one under test does not know
            publisher.prompts.update(name, template="Hi {name}.")
        script.answers.extend(step.answers)
        sent = script.sent
        answers.append((await ask(step), script.sent - sent))
    return answers


def served(fetch: Callable[[], promptrail.PromptTemplate]) -> str:
    """Return what a caller got: ``v<version>`` (``v0``: the fallback) or the error's class."""
    try:
        return f"v{fetch().version}"
    except promptrail.PromptrailError as exc:
        return type(exc).__name__


async def async_served(fetch: Awaitable[promptrail.PromptTemplate]) -> str:
    """Return what a caller got, as :func:`served` does."""
    try:
        return f"v{(await fetch).version}"
    except promptrail.PromptrailError as exc:
        return type(exc).__name__


async def run_sync(url: str, name: str, steps: list[Step]) -> list[Answer]:
    """Play the steps through a :class:`promptrail.Client`."""
    script = Script()
    wire = SyncWire(script)
    with (
        promptrail.Client(DEFAULT_KEY, url) as publisher,
        httpx.Client(transport=wire) as http,
        promptrail.Client(DEFAULT_KEY, url, http_client=http, max_retries=0) as client,
    ):
        wire.elsewhere = lambda: client.prompts.template(name)

        async def ask(step: Step) -> str:
            before = set(threading.enumerate())
            answer = served(lambda: client.prompts.template(name, **step.options))
            # Let the refresh the call started in the background finish.
            for thread in set(threading.enumerate()) - before:
                if thread.name.startswith("promptrail"):
                    thread.join()
            return answer

        return await play(ask, script, publisher, name, steps)


async def run_async(url: str, name: str, steps: list[Step]) -> list[Answer]:
    """Play the steps through a :class:`promptrail.AsyncClient`."""
    script = Script()
    wire = AsyncWire(script)
    with promptrail.Client(DEFAULT_KEY, url) as publisher:
        async with (
            httpx.AsyncClient(transport=wire) as http,
            promptrail.AsyncClient(DEFAULT_KEY, url, http_client=http, max_retries=0) as client,
        ):
            wire.elsewhere = lambda: client.prompts.template(name)

            async def ask(step: Step) -> str:
                before = asyncio.all_tasks()
                answer = await async_served(client.prompts.template(name, **step.options))
                # Let the refresh the call started in the background finish.
                started = asyncio.all_tasks() - before
                if started:
                    await asyncio.wait(started)
                return answer

            return await play(ask, script, publisher, name, steps)


@pytest.mark.parametrize(("steps", "expected"), list(CASES.values()), ids=list(CASES))
async def test_sync_and_async_clients_give_the_same_template(
    runs_url: str, steps: list[Step], expected: list[Answer]
) -> None:
    sync_answers = await run_sync(runs_url, "twins-sync", steps)
    async_answers = await run_async(runs_url, "twins-async", steps)

    assert sync_answers == async_answers == expected


# -- every resource: the async twin has the same methods, taking the same arguments ----------


@pytest.mark.parametrize(
    ("sync", "twin"),
    [
        (resources.Prompts, resources.AsyncPrompts),
        (resources.Requests, resources.AsyncRequests),
        (resources.Scores, resources.AsyncScores),
    ],
    ids=["prompts", "requests", "scores"],
)
def test_each_async_resource_has_the_sync_methods_and_arguments(sync: type, twin: type) -> None:
    def methods(cls: type) -> dict[str, list[tuple[str, Any, Any]]]:
        return {
            name: [
                (p.name, p.kind, p.default)
                for p in inspect.signature(getattr(cls, name)).parameters.values()
            ]
            for name in dir(cls)
            if not name.startswith("_")
        }

    assert methods(sync) == methods(twin)


# -- scores: the same calls give the same answers ------------------------------------------


def score_steps(trace_id: str) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Calls on ``client.scores`` (method, args, kwargs) on the scores of one trace."""
    on = {"trace_id": trace_id}
    return [
        ("create", ("stars", 2), {**on, "id": f"{trace_id[:4]}-1"}),
        ("create", ("stars", 4), {**on, "id": f"{trace_id[:4]}-1"}),  # replaces
        ("batch", ([{"name": "stars", "value": 5, **on}, {"name": "stars", "value": 1}],), {}),
        ("list", (), {**on, "limit": 1}),
        ("get", (f"{trace_id[:4]}-1",), {}),
        ("delete", (f"{trace_id[:4]}-1",), {}),
        ("get", (f"{trace_id[:4]}-1",), {}),
        ("token", ("stars",), {**on, "ttl_seconds": 60}),
    ]


def outcome(value: Any) -> Any:
    """What a step gave, without what differs between two runs (ids, times, tokens)."""
    if isinstance(value, promptrail.Score):
        return ("Score", value.name, value.value, value.data_type, value.source)
    if isinstance(value, promptrail.BatchResult):
        return ("BatchResult", value.accepted, [r.index for r in value.rejected])
    if isinstance(value, promptrail.FeedbackToken):
        return ("FeedbackToken", value.token.startswith("pft_"), value.url.endswith(value.token))
    if isinstance(value, list):
        return sorted(map(outcome, value))
    return type(value).__name__


async def test_sync_and_async_clients_give_the_same_scores(runs_url: str) -> None:
    sync_answers: list[Any] = []
    async_answers: list[Any] = []
    with promptrail.Client(DEFAULT_KEY, runs_url) as client:
        for method, args, kwargs in score_steps("aa" * 16):
            try:
                answer = getattr(client.scores, method)(*args, **kwargs)
                sync_answers.append(outcome(list(answer) if method == "list" else answer))
            except promptrail.PromptrailError as exc:
                sync_answers.append(type(exc).__name__)
    async with promptrail.AsyncClient(DEFAULT_KEY, runs_url) as aclient:
        for method, args, kwargs in score_steps("bb" * 16):
            try:
                if method == "list":
                    listed = [s async for s in aclient.scores.list(*args, **kwargs)]
                    async_answers.append(outcome(listed))
                else:
                    async_answers.append(
                        outcome(await getattr(aclient.scores, method)(*args, **kwargs))
                    )
            except promptrail.PromptrailError as exc:
                async_answers.append(type(exc).__name__)

    assert sync_answers == async_answers
    assert sync_answers[4] == ("Score", "stars", 4, "numeric", "api")
    assert sync_answers[6] == "NotFoundError"
    assert sync_answers[3] == [
        ("Score", "stars", 4, "numeric", "api"),
        ("Score", "stars", 5, "numeric", "api"),
    ]
