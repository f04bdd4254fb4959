"""Runs (spec 4.3, 6; docs/api-notes.md, "Runs"): render a stored version, call its model, log the
call.

A run has three steps, and only the first can fail with a plain client error:

1. :meth:`RunService.prepare` resolves the version (latest, number or label), routes its model
   to a provider, renders the template into messages. Unknown prompt, version or label (404),
   unknown model (400 VALIDATION_ERROR) and missing variables (400 INVALID_TEMPLATE) are
   raised here, before anything is sent upstream and before a stream starts.
2. :meth:`RunService.complete` (whole) or :meth:`RunService.stream` (server-sent events) calls
   the provider.
3. The run is logged as one request record, success or failure, in a single insert made
   right after the answer is ready (write-behind, :mod:`..store.writes`): the caller does
   not wait for the insert, and every read of the request log on this collector waits for
   it, so the record is readable by the time the answer (or the stream's ``end`` /
   ``error`` event) reaches the client.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import anyio

from ..errors import ValidationFailed
from ..models.runs import RunRequest, RunResult
from ..providers import (
    CompletionRequest,
    Provider,
    ProviderFailure,
    StreamEnd,
    TextDelta,
    TokenUsage,
    wire_message,
)
from ..providers.routing import provider_for
from ..store.connections import ConnectionRow
from ..store.prompts import PromptVersionRow
from ..store.request_rows import RequestRow, encode_rows
from ..store.writes import PendingWrites, Refused, RowWriter, WriteOutcome
from .connections.credentials import Credentials, Route
from .dates import utc_now_ms
from .ingest import new_request_id
from .pricing import PriceBook
from .prompts import PromptService
from .run_parts import (
    USER_INPUT,
    Outcome,
    Relayed,
    build_messages,
    internal_error,
    ms,
    output_of,
    provider_error,
    reason,
    usage_of,
)
from .templates import render_chat, template_variables

__all__ = ["PreparedRun", "RecordKeeper", "Relayed", "RunService", "RunTarget", "build_messages"]

logger = logging.getLogger("promptrail.runs")

RecordKeeper = Callable[[RequestRow], None]
"""Takes a finished run's record to store it with the caller's own batch (an experiment's
results) instead of one write-behind insert per record."""


@dataclass(frozen=True)
class RunTarget:
    """The version a run path addresses: the newest, a number, or a label."""

    prompt: str
    number: int | None = None
    label: str | None = None


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to call its provider."""

    project: str
    request_id: str
    created_at: datetime
    version: PromptVersionRow
    provider: Provider
    request: CompletionRequest
    input_variables: dict[str, Any]
    metadata: dict[str, Any]
    stream: bool
    started: float
    pre_process_ms: int
    # The record's environment: a run's own, or the service's (an experiment's runs).
    environment: str = "production"
    # The connection whose credentials the call uses (None: the server's environment), and
    # the model as written (``<connection>/<model>``), which the record keeps.
    connection: ConnectionRow | None = None
    written_model: str | None = None


def last(run: PreparedRun, finished: Relayed) -> dict[str, Any]:
    """A streamed run's last event (spec 6): ``end`` with its usage, or ``error``."""
    if finished.error is not None or finished.row is None:
        return {"type": "error", "error": finished.error or internal_error(run)}
    row = finished.row
    event: dict[str, Any] = {
        "type": "end",
        "usage": usage_of(row).model_dump(),
        "cost_known": row.cost_known,
    }
    if run.version.type == "chat":
        event["finish_reason"] = row.output["finish_reason"]
        if "tool_calls" in row.output:
            event["tool_calls"] = row.output["tool_calls"]
    return event


class RunService:
    """Run stored prompts against their providers and log every run."""

    def __init__(
        self,
        prompts: PromptService,
        records: RowWriter,
        providers: Mapping[str, Provider],
        prices: PriceBook,
        pending: PendingWrites,
        credentials: Credentials | None = None,
    ) -> None:
        """Write run records through ``records`` (the request log's writer), behind their
        answers on ``pending``; route models by ``credentials`` (the credential order of
        docs/api-notes.md, Connections), else to ``providers`` alone."""
        self._credentials = credentials
        self._prompts = prompts
        self._records = records
        self._pending = pending
        self._providers = dict(providers)
        self._prices = prices
        self._closing: asyncio.Task[None] | None = None

    # -- 1. prepare ------------------------------------------------------------------------

    async def prepare(
        self, project: str, target: RunTarget, body: RunRequest, admit: bool = True
    ) -> PreparedRun:
        """Resolve, route and render; raise the client errors before anything is sent.

        ``admit`` False leaves the connection's checks (:meth:`admit`) to the caller, which
        may send the run to another model first (:meth:`retarget`).
        """
        started = time.perf_counter()
        created_at = utc_now_ms()
        version = self._prompts.cached_version(
            project, target.prompt, number=target.number, label=target.label
        )
        if version is None:
            version = await anyio.to_thread.run_sync(self._resolve, project, target)
        return await self.prepare_version(
            project, version, body, admit=admit, started=started, created_at=created_at
        )

    async def prepare_version(
        self,
        project: str,
        version: PromptVersionRow,
        body: RunRequest,
        *,
        model: str | None = None,
        admit: bool = True,
        started: float | None = None,
        created_at: datetime | None = None,
    ) -> PreparedRun:
        """Route and render a version already in hand (``model``: another model than the
        version's, as written); raise the client errors before anything is sent."""
        started = time.perf_counter() if started is None else started
        created_at = utc_now_ms() if created_at is None else created_at
        written = version.model if model is None else model
        route = await self._route(project, written)
        if route is None:
            raise ValidationFailed(
                "model",
                f"Unknown model '{written}': name it openai/<model>, anthropic/<model> "
                "or <connection>/<model>, or use a gpt-, o1, o3, o4, chatgpt- or claude- model",
                model=written,
            )
        model = route.model
        variables = {**(body.input_variables or {}), **(body.variables or {})}
        if version.type == "chat":
            request = self._chat_request(version, model, variables, body)
        else:
            messages = build_messages(version.template, variables, body.user_input)
            request = CompletionRequest(model, messages, dict(version.parameters))
            if body.user_input is not None and USER_INPUT in template_variables(version.template):
                variables[USER_INPUT] = body.user_input
        if admit and route.connection is not None:
            await self._admit(project, route.connection)
        return PreparedRun(
            project=project,
            request_id=new_request_id(created_at),
            created_at=created_at,
            version=version,
            provider=route.provider,
            request=request,
            input_variables=variables,
            metadata=body.metadata,
            stream=body.stream,
            started=started,
            pre_process_ms=ms(time.perf_counter() - started),
            connection=route.connection,
            written_model=written if route.connection is not None else None,
        )

    async def aroute(self, project: str, model: str) -> Route | None:
        """The route of ``model`` for ``project`` by the credential order; None: unknown."""
        return await self._route(project, model)

    async def _route(self, project: str, model: str) -> Route | None:
        if self._credentials is not None:
            return await self._credentials.aroute(project, model)
        routed = provider_for(model)
        return None if routed is None else Route(self._providers[routed[0]], routed[1])

    def routable(self, project: str, model: str) -> bool:
        """Whether ``model`` routes to a provider for ``project`` (from a worker thread)."""
        if self._credentials is not None:
            return self._credentials.route(project, model) is not None
        return provider_for(model) is not None

    async def admit(self, run: PreparedRun) -> None:
        """Check the connection a run goes through (link-local base URL: 400; budget
        reached: 402), before anything is sent."""
        if run.connection is not None:
            await self._admit(run.project, run.connection)

    async def _admit(self, project: str, connection: ConnectionRow) -> None:
        assert self._credentials is not None  # a connection is routed by the credentials
        await self._credentials.admit(project, connection)

    @staticmethod
    def _chat_request(
        version: PromptVersionRow,
        model: str,
        variables: dict[str, Any],
        body: RunRequest,
    ) -> CompletionRequest:
        """Render a chat prompt's messages and carry its tools and answer format (each
        provider maps them to its own shapes: docs/api-notes.md, "Chat prompts")."""
        messages = render_chat(version, variables, body.placeholders or {}, body.user_input)
        return CompletionRequest(
            model,
            tuple(messages),
            dict(version.parameters),
            tools=version.tools,
            tool_choice=version.tool_choice,
            response_format=version.response_format,
            chat=True,
        )

    def retarget(
        self, run: PreparedRun, model: str | None, parameters: Mapping[str, Any] | None
    ) -> PreparedRun:
        """Return ``run`` sent to ``model`` and with ``parameters`` laid over the version's
        (an experiment's overrides); an unroutable model is a 400 naming ``model``."""
        if model is not None:
            if self._credentials is not None:
                route = self._credentials.route(run.project, model)
            else:
                routed = provider_for(model)
                route = None if routed is None else Route(self._providers[routed[0]], routed[1])
            if route is None:
                raise ValidationFailed("model", f"Unknown model '{model}'", model=model)
            run = replace(
                run,
                provider=route.provider,
                request=replace(run.request, model=route.model),
                connection=route.connection,
                written_model=model if route.connection is not None else None,
            )
        if parameters:
            run = replace(
                run,
                request=replace(run.request, parameters={**run.request.parameters, **parameters}),
            )
        return run

    def _resolve(self, project: str, target: RunTarget) -> PromptVersionRow:
        return self._prompts.resolve_version(
            project, target.prompt, number=target.number, label=target.label
        )

    # -- 2a. whole -------------------------------------------------------------------------

    async def complete(self, run: PreparedRun, keep: RecordKeeper | None = None) -> RunResult:
        """Call the provider, store the record, return the result; 502 on provider failure.

        With ``keep``, the record (success or provider failure) is handed to it after the
        latency is taken, and the caller stores it (:meth:`store_records`); a run cut short
        otherwise (cancelled) has no caller left to keep it: its record is written behind.
        """
        call_started = time.perf_counter()
        try:
            completion = await run.provider.complete(run.request)
        except BaseException as exc:
            llm_call_ms = ms(time.perf_counter() - call_started)
            failure = Outcome("", None, TokenUsage(), llm_call_ms, error=reason(exc))
            if isinstance(exc, ProviderFailure):
                self._store_quietly(run, failure, keep)
                raise provider_error(run, exc) from None
            self._store_quietly(run, failure)
            raise
        outcome = Outcome(
            completion.content,
            completion.finish_reason,
            completion.usage,
            ms(time.perf_counter() - call_started),
            tool_calls=completion.tool_calls,
        )
        row = self._store(run, outcome, keep)
        chat = run.version.type == "chat"
        return RunResult(
            id=row.id,
            output=completion.content,
            prompt_name=row.prompt_name,
            version=row.version,
            model=row.model,
            metadata=row.metadata,
            usage=usage_of(row),
            cost_known=row.cost_known,
            latency_ms=row.latency_ms,
            created_at=row.created_at,
            finish_reason=completion.finish_reason if chat else None,
            tool_calls=[c.as_dict() for c in completion.tool_calls]
            if chat and completion.tool_calls
            else None,
        )

    # -- 2b. stream ------------------------------------------------------------------------

    async def stream(self, run: PreparedRun) -> AsyncGenerator[dict[str, Any], None]:
        """Yield spec 6 events: start, a chunk per provider delta, then end (or error).

        The record is handed to the store before ``end`` or ``error`` is sent. A client that
        goes away closes this iterator, which closes the upstream stream, and the record says
        so.
        """
        try:
            yield {"type": "start", "request_id": run.request_id}
        except BaseException as exc:
            self._store_quietly(run, Outcome("", None, TokenUsage(), 0, error=reason(exc)))
            raise
        async with aclosing(self.relay(run)) as relayed:
            async for item in relayed:
                # The last event goes out as soon as the answer is complete; the relay then
                # reads the provider's body to its end.
                if isinstance(item, tuple):
                    for piece in item:  # each as the provider sent it (spec 6)
                        yield {"type": "chunk", "content": piece}
                else:
                    yield last(run, item)

    async def relay(
        self, run: PreparedRun, keep: RecordKeeper | None = None
    ) -> AsyncGenerator[tuple[str, ...] | Relayed, None]:
        """Stream a run from its provider: yield the text pieces of each read (each piece as
        the provider sent it), then one :class:`Relayed` (the record, and the error body when
        the provider or the service failed).

        The record is handed to the store (or to ``keep``) before the last item; a caller
        that closes this iterator early closes the upstream stream, and the record (written
        behind: no caller is left to keep it) says so.
        """
        call_started = time.perf_counter()
        first_token: float | None = None
        pieces: list[str] = []
        end: StreamEnd | None = None
        row: RequestRow | None = None

        def outcome(error: str | None = None) -> Outcome:
            return Outcome(
                "".join(pieces),
                end.finish_reason if end else None,
                end.usage if end else TokenUsage(),
                ms(time.perf_counter() - call_started),
                None if first_token is None else ms(first_token - call_started),
                error,
                end.tool_calls if end else (),
            )

        try:
            async with aclosing(run.provider.stream(run.request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        if first_token is None:
                            first_token = time.perf_counter()
                        pieces.extend(event.pieces)
                        yield event.pieces
                    elif row is None:
                        # The answer is complete: its record and its end go out now, while
                        # the provider's stream reads its body's end (its connection back
                        # to the pool), which is no part of the answer's time.
                        end = event
                        row = self._store(run, outcome(), keep)
                        yield Relayed(row)
            if row is None:
                row = self._store(run, outcome(), keep)
                yield Relayed(row)
        except ProviderFailure as exc:
            if row is not None:
                return
            failed = self._store_quietly(run, outcome(exc.message), keep)
            yield Relayed(failed, provider_error(run, exc).body()["error"])
            return
        except Exception as exc:
            logger.exception("run %s failed", run.request_id)
            if row is not None:
                return
            failed = self._store_quietly(run, outcome(reason(exc)), keep)
            yield Relayed(failed, internal_error(run))
            return
        except BaseException as exc:
            # Cancelled, or closed by a client that went away: the upstream stream is closed
            # by now; keep the record of what was relayed (unless it is kept already).
            if row is None:
                self._store_quietly(run, outcome(reason(exc)))
            raise

    # -- 3. store --------------------------------------------------------------------------

    def _store(
        self, run: PreparedRun, outcome: Outcome, keep: RecordKeeper | None = None
    ) -> RequestRow:
        """Price the run and hand its record to the store (one insert, in the background),
        or to ``keep``.

        ``latency_ms`` is the run's time until its answer was complete and priced; the
        insert that follows is bookkeeping and not counted.
        """
        post_started = time.perf_counter()
        usage = outcome.usage
        cost = self._prices.cost(
            run.provider.name,
            run.request.model,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            at=run.created_at,
            cache_write_tokens=usage.cache_write_tokens,
        )
        metadata = run.metadata
        if run.connection is not None:
            # Tagged so that the connection's spend is the sum of its records' costs.
            metadata = {**metadata, "connection": run.connection.name}
            assert self._credentials is not None
            self._credentials.charge(run.project, run.connection.name, cost or 0.0, run.created_at)
        row = RequestRow(
            id=run.request_id,
            created_at=run.created_at,
            prompt_name=run.version.name,
            version=run.version.version,
            model=run.written_model or run.request.model,
            provider=run.provider.name,
            status="error" if outcome.error is not None else "success",
            input_variables=run.input_variables,
            input=[wire_message(m) for m in run.request.messages],
            output=output_of(outcome),
            metadata=metadata,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            estimated_cost_usd=cost or 0.0,
            cost_known=cost is not None,
            latency_ms=ms(time.perf_counter() - run.started),
            time_to_first_token_ms=outcome.time_to_first_token_ms,
            pre_process_ms=run.pre_process_ms,
            llm_call_ms=outcome.llm_call_ms,
            post_process_ms=ms(time.perf_counter() - post_started),
            integration={"pre_process_executed": True, "post_process_executed": True, "errors": []},
            error=outcome.error or "",
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            environment=run.environment,
        )
        if keep is not None:
            keep(row)
        else:
            self.store_later(run.project, [row])
        return row

    def _store_quietly(
        self, run: PreparedRun, outcome: Outcome, keep: RecordKeeper | None = None
    ) -> RequestRow | None:
        """Store a failed run's record; log (never raise) a failure (then None)."""
        try:
            return self._store(run, outcome, keep)
        except Exception:
            logger.exception("record of failed run %s not stored", run.request_id)
            return None

    def store_records(self, project: str, rows: Sequence[RequestRow]) -> None:
        """Insert records kept by their caller (one insert for them all) and return once
        they are stored; a store that refuses them gets them written behind, retried."""
        if not rows:
            return
        try:
            outcome = self.write_records(project, rows)
        except Exception as exc:
            outcome = Refused(busy=False, message=str(exc))
        if isinstance(outcome, Refused):
            logger.warning(
                "%d run records not stored at once, retrying: %s", len(rows), outcome.message
            )
            self.store_later(project, rows)

    def store_later(self, project: str, rows: Sequence[RequestRow]) -> None:
        """Hand records to the write-behind pool (every read of the log waits for them)."""
        what = f"record of run {rows[0].id}" if len(rows) == 1 else f"{len(rows)} run records"
        kept = list(rows)
        self._pending.submit(project, what, lambda: self.write_records(project, kept))

    def write_records(self, project: str, rows: Sequence[RequestRow]) -> WriteOutcome:
        """One write of run records through the request log's writer."""
        values = [{f.name: getattr(row, f.name) for f in fields(row)} for row in rows]
        return self._records.insert(encode_rows(project, values), len(values))

    # -- lifecycle -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every provider's pooled connections."""
        for provider in self._providers.values():
            await provider.aclose()
        if self._credentials is not None:
            await self._credentials.aclose()

    def close(self) -> None:
        """Close the providers' connections (from the app's lifespan, or with no loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        # The lifespan's shutdown runs inside the event loop that owns the connections; the
        # close runs there as a task, as soon as the shutdown yields to the loop.
        self._closing = loop.create_task(self.aclose())

    async def wait_closed(self) -> None:
        """Wait for the close :meth:`close` started in the running loop (a no-op otherwise):
        the loop must not end before the providers' connections are closed."""
        if self._closing is not None:
            await self._closing
