"""Playground runs (docs/api-notes.md, "Playground"): one prompt, inline or a stored version
with overrides, tried on several inputs, models and repetitions at once, without writing to
the registry.

A run has two steps, as a run of a stored prompt has (:mod:`..runs`):

1. :meth:`PlaygroundService.plan` resolves the prompt, reads the dataset's items, routes every
   model by the credential order and renders every (input, model) pair, then estimates the
   run's cost (:mod:`.estimate`): every client error (an unknown prompt, dataset or model,
   missing variables, a run estimated above ``max_cost_usd``: 402) is raised here, before
   anything is called and before a stream starts. A dataset item the prompt cannot be
   rendered with makes its cells error cells instead, as an experiment's items do.
2. :meth:`PlaygroundService.run` (whole) or :meth:`PlaygroundService.stream` (server-sent
   events, :mod:`.stream`) calls the cells, at most :data:`MAX_CONCURRENT_CELLS` at once; a
   failing cell does not stop the others. Each cell is one request record of the
   ``promptrail-playground`` environment, with ``metadata.source = "playground"`` and
   ``metadata.playground_run_id``; the run's records are written in one insert behind the
   answer (every read of the log waits for it).

:meth:`PlaygroundService.estimate_run` makes step 1 alone and answers its estimate, so the
estimate shown before a run is the one that run makes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from ...errors import BudgetExceeded, ContractError, ValidationFailed
from ...models.chat_prompts import stored
from ...models.playground import (
    CellEstimate,
    CellHead,
    InlinePrompt,
    PlaygroundCell,
    PlaygroundEstimateOut,
    PlaygroundRunIn,
    PlaygroundRunOut,
    PromptOverrides,
    StoredPrompt,
)
from ...models.runs import RunRequest
from ...store.prompts import PromptVersionRow
from ...store.request_rows import RequestRow
from ..datasets import DatasetService
from ..dates import utc_now_ms
from ..pricing import PriceBook
from ..prompts import PromptService
from ..runs import PreparedRun, RecordKeeper, RunService
from ..templates import check_messages, parse_template
from . import estimate
from .cells import Deltas, Ended, PlannedCell, internal, run_cell
from .stream import multiplex

logger = logging.getLogger("promptrail.playground")

MAX_CONCURRENT_CELLS = 8
SOURCE = "playground"
# The version fields an override may set (each replaces the version's own).
_OVERRIDABLE = (
    "template",
    "messages",
    "model",
    "parameters",
    "tools",
    "tool_choice",
    "response_format",
    "variables_schema",
    "config",
)


def new_run_id() -> str:
    """A playground run's id: ``pg_`` and 32 hex digits."""
    return f"pg_{os.urandom(16).hex()}"


@dataclass(frozen=True)
class Plan:
    """A run ready to call: its cells, prepared, and its estimate."""

    project: str
    id: str
    estimate: estimate.Estimate
    cells: list[PlannedCell]
    stream: bool


class PlaygroundService:
    """Plan, estimate and run playground runs through the runs' own call path."""

    def __init__(
        self,
        runs: RunService,
        prompts: PromptService,
        datasets: DatasetService,
        prices: PriceBook,
        tokenizers: estimate.Tokenizers = estimate.TOKENIZERS,
        concurrency: int = MAX_CONCURRENT_CELLS,
    ) -> None:
        self._runs = runs
        self._prompts = prompts
        self._datasets = datasets
        self._prices = prices
        self._tokenizers = tokenizers
        self._concurrency = concurrency

    # -- 1. plan ---------------------------------------------------------------------------

    async def plan(self, project: str, body: PlaygroundRunIn) -> Plan:
        """Resolve, route, render and estimate; raise every client error before a call."""
        plan = await self._plan(project, body)
        total = plan.estimate
        if body.max_cost_usd is not None and total.cost_usd > body.max_cost_usd:
            raise BudgetExceeded(
                f"The run is estimated at ${total.cost_usd:.6f}, above its max_cost_usd "
                f"${body.max_cost_usd}: nothing was called",
                {
                    "estimated_usd": total.cost_usd,
                    "max_cost_usd": body.max_cost_usd,
                    "estimate_method": total.method,
                },
            )
        return plan

    async def estimate_run(self, project: str, body: PlaygroundRunIn) -> PlaygroundEstimateOut:
        """The estimate a run of ``body`` would make, and each cell's, calling nothing.

        The run's own plan, made and dropped: the same client errors, the same numbers;
        ``max_cost_usd`` is not applied (the caller compares) and ``stream`` is ignored.
        """
        plan = await self._plan(project, body)
        total = plan.estimate
        return PlaygroundEstimateOut(
            estimated_cost_usd=total.cost_usd,
            estimated_input_tokens=total.input_tokens,
            estimated_output_tokens=total.output_tokens,
            estimate_method=total.method,
            cells=[
                CellEstimate(
                    **c.head.model_dump(),
                    estimated_cost_usd=c.estimate.cost_usd if c.estimate else 0.0,
                )
                for c in plan.cells
            ],
        )

    async def _plan(self, project: str, body: PlaygroundRunIn) -> Plan:
        """Resolve, route, render and estimate, leaving ``max_cost_usd`` to the caller."""
        version, base_version = await self._version(project, body.prompt)
        models = body.models or [version.model]
        for model in models:
            if await self._runs.aroute(project, model) is None:
                raise ValidationFailed(
                    "models",
                    f"Unknown model '{model}': name it openai/<model>, anthropic/<model> or "
                    "<connection>/<model>, or use a gpt-, o1, o3, o4, chatgpt- or claude- model",
                    model=model,
                )
        inputs = await self._inputs(project, body)
        run_id = new_run_id()
        now = utc_now_ms()
        cells: list[PlannedCell] = []
        priced: list[estimate.Priced] = []
        for item_id, variables in inputs:
            for model in models:
                request = RunRequest(variables=variables, placeholders=body.placeholders)
                prepared: PreparedRun | None = None
                error: dict[str, Any] | None = None
                one: estimate.Priced | None = None
                try:
                    prepared = await self._runs.prepare_version(
                        project, version, request, model=model, admit=False
                    )
                except ContractError as exc:
                    if item_id is None:
                        raise  # the given variables: every cell would fail alike
                    error = exc.body()["error"]
                else:
                    one = await estimate.price(
                        prepared.provider.name,
                        prepared.request,
                        self._prices,
                        now,
                        self._tokenizers,
                    )
                    priced.extend([one] * body.repetitions)
                for repetition in range(1, body.repetitions + 1):
                    head = CellHead(
                        cell=len(cells), model=model, item_id=item_id, repetition=repetition
                    )
                    metadata: dict[str, Any] = {
                        "source": SOURCE,
                        "playground_run_id": run_id,
                        "playground_cell": head.cell,
                        "repetition": repetition,
                    }
                    if item_id is not None:
                        metadata["dataset_item_id"] = item_id
                    if base_version is not None:
                        metadata["base_version"] = base_version
                    cells.append(PlannedCell(head, prepared, error, metadata, one))
        return Plan(project, run_id, estimate.total(priced), cells, body.stream)

    async def _version(
        self, project: str, prompt: InlinePrompt | StoredPrompt
    ) -> tuple[PromptVersionRow, int | None]:
        """The version the run tries, and the stored version it overrides (if it does)."""
        if isinstance(prompt, InlinePrompt):
            return _inline_version(prompt), None
        version = self._prompts.cached_version(
            project, prompt.name, number=prompt.version, label=prompt.label
        )
        if version is None:
            version = await anyio.to_thread.run_sync(
                lambda: self._prompts.resolve_version(
                    project, prompt.name, number=prompt.version, label=prompt.label
                )
            )
        overrides = prompt.overrides
        if overrides is None:
            return version, None
        changed = _overridden(version, overrides.model_fields_set, overrides)
        return (version, None) if changed is version else (changed, version.version)

    async def _inputs(
        self, project: str, body: PlaygroundRunIn
    ) -> list[tuple[str | None, dict[str, Any]]]:
        """The run's inputs: the dataset's first items (their ids), or the variables."""
        if body.dataset is None:
            return [(None, body.variables or {})]
        pick = body.dataset
        items, _ = await anyio.to_thread.run_sync(
            self._datasets.items_page, project, pick.name, pick.limit, None
        )
        if not items:
            raise ValidationFailed("dataset", f"Dataset '{pick.name}' has no items")
        return [(item.id, item.input_variables) for item in items]

    # -- 2. run ----------------------------------------------------------------------------

    async def run(self, plan: Plan) -> PlaygroundRunOut:
        """Run every cell; answer once they are all done."""
        rows: list[RequestRow] = []
        try:
            cells = await self._cells(plan, rows.append)
        finally:
            self._keep(plan, rows)
        return answer(plan, cells)

    def stream(self, plan: Plan) -> AsyncGenerator[list[dict[str, Any]], None]:
        """Run every cell, yielding ``start``, each cell's chunks and ``end`` as they come,
        then ``done``: in batches, each one the events ready at once."""
        rows: list[RequestRow] = []
        return multiplex(
            plan,
            lambda deltas, ended: self._cells(plan, rows.append, deltas, ended),
            lambda: self._keep(plan, rows),
        )

    async def _cells(
        self,
        plan: Plan,
        keep: RecordKeeper,
        deltas: Deltas | None = None,
        ended: Ended | None = None,
    ) -> list[PlaygroundCell]:
        """Run the cells, at most ``concurrency`` at once; hand each one to ``ended``."""
        limit = asyncio.Semaphore(self._concurrency)

        async def one(planned: PlannedCell) -> PlaygroundCell:
            told: list[PlaygroundCell] = []

            def tell(cell: PlaygroundCell) -> None:
                told.append(cell)
                if ended is not None:
                    ended(cell)

            try:
                async with limit:
                    return await run_cell(self._runs, planned, keep, deltas, tell)
            except Exception:
                logger.exception("cell %d of %s failed", planned.head.cell, plan.id)
                if told:  # it failed after its end was handed on
                    return told[0]
                cell = internal(planned.head)
                tell(cell)
                return cell

        return list(await asyncio.gather(*(one(c) for c in plan.cells)))

    def _keep(self, plan: Plan, rows: Sequence[RequestRow]) -> None:
        """Hand the run's records to the store, in one insert."""
        if rows:
            self._runs.store_later(plan.project, list(rows))


def answer(plan: Plan, cells: Sequence[PlaygroundCell]) -> PlaygroundRunOut:
    """A run's answer from its finished cells."""
    return PlaygroundRunOut(
        id=plan.id,
        estimated_cost_usd=plan.estimate.cost_usd,
        estimate_method=plan.estimate.method,
        estimated_input_tokens=plan.estimate.input_tokens,
        estimated_output_tokens=plan.estimate.output_tokens,
        cost_usd=round(sum(c.estimated_cost_usd for c in cells), 10),
        cells=sorted(cells, key=lambda c: c.cell),
    )


def _inline_version(prompt: InlinePrompt) -> PromptVersionRow:
    """A version made of an inline prompt's fields (never stored: it has no name)."""
    if prompt.template is not None:
        parse_template(prompt.template)
    messages = stored(prompt.messages)
    if messages is not None:
        check_messages(messages)
    now = utc_now_ms()
    return PromptVersionRow(
        prompt_id="",
        version=0,
        version_id="",
        name="",
        description="",
        template=prompt.template or "",
        model=prompt.model,
        parameters=prompt.parameters,
        tags=[],
        folder="",
        note="",
        prompt_created_at=now,
        created_at=now,
        type=prompt.type,
        messages=messages,
        tools=stored(prompt.tools),
        tool_choice=stored(prompt.tool_choice),
        response_format=stored(prompt.response_format),
        variables_schema=stored(prompt.variables_schema),
        config=stored(prompt.config),
    )


def _overridden(
    version: PromptVersionRow, given: set[str], overrides: PromptOverrides
) -> PromptVersionRow:
    """``version`` with the overrides laid over it, as a PATCH setting them would make it
    (its number 0: it is not stored), or ``version`` itself when none changes a call."""
    if overrides.type is not None and overrides.type != version.type:
        raise ValidationFailed(
            "prompt.overrides.type",
            f"A prompt's type is fixed at create: this is a {version.type} prompt",
        )
    other = "template" if version.type == "chat" else "messages"
    if other in given:
        kind = "text" if other == "template" else "chat"
        raise ValidationFailed(
            f"prompt.overrides.{other}",
            f"{other} belongs to {kind} prompts; this is a {version.type} prompt",
        )
    changes = {key: stored(getattr(overrides, key)) for key in _OVERRIDABLE if key in given}
    if not changes:
        return version  # nothing a cell sends changes: the stored version as it is
    if changes.get("template") is not None:
        parse_template(changes["template"])
    if changes.get("messages") is not None:
        check_messages(changes["messages"])
    return replace(version, **changes, version=0)
