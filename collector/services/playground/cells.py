"""One playground cell: a prepared run (see :mod:`..runs`) called through its provider's
stream, its deltas handed on, its record kept with the run's others.

A cell that cannot run (a dataset item lacking a variable, a connection at its budget) is an
error cell and the others run on; a cell refused before its call has no record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from ...errors import ContractError
from ...models.playground import CellHead, PlaygroundCell
from ...models.requests import PLAYGROUND_ENVIRONMENT
from ...models.runs import RunUsage
from ..dates import utc_now_ms
from ..ingest import new_request_id
from ..run_parts import Relayed, usage_of
from ..runs import PreparedRun, RecordKeeper, RunService
from .estimate import Priced

logger = logging.getLogger("promptrail.playground")

Deltas = Callable[[int, tuple[str, ...]], Awaitable[None]]
"""Takes a cell's text deltas as they arrive (its number, the pieces one read brought)."""
Ended = Callable[[PlaygroundCell], None]
"""Takes each cell as it finishes."""


@dataclass(frozen=True)
class PlannedCell:
    """A cell of a run: what it is, its prepared run (None: ``error`` says why not) and its
    estimate."""

    head: CellHead
    run: PreparedRun | None
    error: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    estimate: Priced | None = None
    """The cell's own estimate (None: it cannot run)."""


def failed(head: CellHead, error: dict[str, Any], request_id: str | None = None) -> PlaygroundCell:
    """A cell that made no answer: its error, nothing spent."""
    return PlaygroundCell(
        **head.model_dump(),
        request_id=request_id,
        output="",
        usage=RunUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0, estimated_cost_usd=0),
        latency_ms=0,
        time_to_first_token_ms=None,
        estimated_cost_usd=0.0,
        cost_known=True,
        status="error",
        error=error,
    )


INTERNAL_ERROR: dict[str, Any] = {
    "type": "api_error",
    "message": "Internal error; see the collector log",
    "code": "INTERNAL_ERROR",
    "details": {},
}


def internal(head: CellHead) -> PlaygroundCell:
    """A cell the service failed (the collector's log says why)."""
    return failed(head, INTERNAL_ERROR)


async def run_cell(
    runs: RunService,
    planned: PlannedCell,
    keep: RecordKeeper,
    deltas: Deltas | None = None,
    ended: Ended | None = None,
) -> PlaygroundCell:
    """Admit and call one cell; its record goes to ``keep``, its deltas to ``deltas``, and the
    cell to ``ended`` as soon as its answer is complete (before the provider's connection is
    done with: the cell's end does not wait for it)."""
    head = planned.head
    if planned.run is None:
        return _told(failed(head, planned.error or INTERNAL_ERROR), ended)
    now = utc_now_ms()
    run = replace(
        planned.run,
        request_id=new_request_id(now),
        created_at=now,
        started=time.perf_counter(),
        environment=PLAYGROUND_ENVIRONMENT,
        metadata=planned.metadata or {},
    )
    try:
        # A connection at its budget (402) or whose host turned link-local (400): no call.
        await runs.admit(run)
    except ContractError as exc:
        return _told(failed(head, exc.body()["error"]), ended)
    cell: PlaygroundCell | None = None
    async with aclosing(runs.relay(run, keep)) as relayed:
        async for item in relayed:
            if isinstance(item, tuple):
                if deltas is not None:
                    await deltas(head.cell, item)
            elif cell is None:
                cell = _told(_cell_of(head, run.request_id, item), ended)
    if cell is None:  # a relay always ends with how it ended; this is a guard
        cell = _told(failed(head, INTERNAL_ERROR, run.request_id), ended)
    return cell


def _told(cell: PlaygroundCell, ended: Ended | None) -> PlaygroundCell:
    if ended is not None:
        ended(cell)
    return cell


def _cell_of(head: CellHead, request_id: str, finished: Relayed) -> PlaygroundCell:
    """The cell a finished call makes: its answer, or its error."""
    if finished.row is None:
        # The call ended but its record could not be made (the log says why).
        return failed(head, finished.error or INTERNAL_ERROR, request_id)
    row = finished.row
    return PlaygroundCell(
        **head.model_dump(),
        request_id=row.id,
        output=str(row.output.get("content") or ""),
        usage=usage_of(row),
        latency_ms=row.latency_ms,
        time_to_first_token_ms=row.time_to_first_token_ms,
        estimated_cost_usd=row.estimated_cost_usd,
        cost_known=row.cost_known,
        status="error" if finished.error is not None else "success",
        error=finished.error,
        tool_calls=row.output.get("tool_calls"),
    )
