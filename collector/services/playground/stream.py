"""A playground run as server-sent events: ``start`` with the cells, then each cell's
``chunk`` and ``end`` events interleaved as they arrive, then ``done``.

The cells run in one task; their deltas and ends go through a queue to the stream, which
hands on in one batch every event that is ready. A client
that goes away closes the stream: the cells still running are cancelled (each one's record
says so) and the records already made are stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio

from ...models.playground import PlaygroundCell
from .cells import Deltas, Ended

if TYPE_CHECKING:
    from .service import Plan

CellRunner = Callable[[Deltas, Ended], Coroutine[Any, Any, list[PlaygroundCell]]]
"""Runs a plan's cells, handing their deltas and ends on (:meth:`PlaygroundService._cells`)."""


async def multiplex(
    plan: Plan, cells: CellRunner, finish: Callable[[], None]
) -> AsyncGenerator[list[dict[str, Any]], None]:
    """Yield a run's events, in batches: each batch is every event that was ready at once
    (the route writes a batch in one piece); ``finish`` stores the records once the cells
    are over.

    Eight cells at once mostly receive their answers together: one write for all the events
    ready, rather than a write (and its trip through the server's layers) for each, keeps
    the cells from waiting for each other's writes.
    """
    yield [
        {
            "type": "start",
            "id": plan.id,
            "estimated_cost_usd": plan.estimate.cost_usd,
            "estimate_method": plan.estimate.method,
            "cells": [c.head.model_dump() for c in plan.cells],
        }
    ]
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def delta(cell: int, pieces: tuple[str, ...]) -> None:
        for text in pieces:  # each as the provider sent it (a chunk event of its own)
            queue.put_nowait({"type": "chunk", "cell": cell, "delta": text})

    def ended(cell: PlaygroundCell) -> None:
        queue.put_nowait({"type": "end", **cell.model_dump(mode="json")})

    task = asyncio.create_task(cells(delta, ended))
    try:
        remaining = len(plan.cells)
        while remaining:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            remaining -= sum(1 for event in batch if event["type"] == "end")
            # The last cells' ends go out now: ``done`` waits for the cells' connections to be
            # read to their ends (each cell ends as soon as its answer is complete).
            yield batch
        finished = await task
        yield [
            {
                "type": "done",
                "id": plan.id,
                "estimated_cost_usd": plan.estimate.cost_usd,
                "cost_usd": round(sum(c.estimated_cost_usd for c in finished), 10),
            }
        ]
    finally:
        if not task.done():
            task.cancel()
            # Shielded: a client that went away cancels this stream's scope at every await;
            # the cells' own clean-up (closing their upstream streams, their records) must
            # still run to its end before the run's records are stored.
            with anyio.CancelScope(shield=True):
                await asyncio.gather(task, return_exceptions=True)
        finish()
