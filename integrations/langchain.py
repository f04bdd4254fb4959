"""LangChain and LangGraph: one trace per run tree, one request record per model call.

    import promptrail
    promptrail.init()
    promptrail.instrument()   # with langchain-core installed: every run is captured

    # or only some runs, by hand:
    from promptrail.integrations.langchain import CallbackHandler
    chain.invoke(inputs, config={"callbacks": [CallbackHandler()]})

Chat-model and LLM runs become request records (model, provider, messages, output, token
usage, errors, latency, time to first token when streamed); chains, tools, retrievers and
LangGraph nodes become their parents, LangChain's ``run_id`` / ``parent_run_id`` tree turned
into span ids in one trace. The handler records the model call itself and the ``openai`` /
``anthropic`` patches stand aside inside it, so each provider call is recorded once (and
models without a promptrail patch are recorded too). Runs LangChain marks hidden
(``langsmith:hidden``, LangGraph's plumbing) are skipped, their children attached to the
nearest recorded ancestor.

While a chain, tool or retriever runs, its span is the current OpenTelemetry span, so what
runs inside it without LangChain's callbacks (a provider call through a patched SDK, an
``@observe`` function, another library's spans) nests under it. A LangGraph interrupt
(``GraphBubbleUp``: ``interrupt()``, ``Command(graph=PARENT)``) is control flow, not an
error: the runs it passes through end as successes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, convert_to_openai_messages
from langchain_core.outputs import LLMResult
from langchain_core.tracers.context import register_configure_hook
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel

from promptrail import _genai, _runtime
from promptrail._capture.spans import CaptureSpan
from promptrail._context import FrameworkCall, call_attributes, to_json

from ._calls import CallRecord, message_texts
from ._stand_in import StandInSpan

logger = logging.getLogger("promptrail")


_HIDDEN = "langsmith:hidden"
_MAX_DEPTH = 8


def _no_texts() -> list[str]:
    return []


class _Node:
    """A run's place in the trace: its own span, or (hidden runs) its ancestor's.

    An owned run's span is current while it runs (:class:`_RunCurrent`); ``attached`` is the
    OpenTelemetry context made current at its start, ``previous`` the one it replaced.
    """

    __slots__ = ("attached", "current", "owned", "previous", "span")

    def __init__(self, span: Span | None, owned: bool) -> None:
        self.span = span
        self.owned = owned
        self.current: _RunCurrent | None = None
        self.attached: Context | None = None
        self.previous: Context | None = None

    def make_current(self, span: Span) -> None:
        """Make ``span`` current in the calling context (the run's start callback)."""
        before = trace.get_current_span()
        # A finished run's stand-in stands for its own ``before``: skip it, so a loop of
        # ``ainvoke`` calls in one task does not build a chain of them.
        while isinstance(before, _RunCurrent) and before.finished:
            before = before.before
        self.current = _RunCurrent(span, before)
        self.previous = otel_context.get_current()
        self.attached = trace.set_span_in_context(self.current)
        otel_context.attach(self.attached)

    def release(self) -> None:
        """Stop being current: everywhere at once, and in this context, restore the one before.

        LangChain's async managers call a run's end in a task of its own (a copy of the
        caller's context), and a stream's end comes in whichever context drains it, so the
        end cannot always undo the start where the start happened: ``detach`` would fail
        there ("Failed to detach context", logged into the application). Instead the
        stand-in left current turns into the span current before the run, wherever it is
        still current; where the end does run in the start's context (sync runs) and
        nothing was made current on top since, that context is restored outright.
        """
        if self.current is None:
            return
        self.current.finish()
        if otel_context.get_current() is self.attached:
            # attach, not detach(token): the token may belong to another context
            otel_context.attach(self.previous or Context())


class _ModelRun:
    """A chat-model or LLM run: its record, and the call the provider patches defer to."""

    __slots__ = ("call", "record")

    def __init__(self, record: CallRecord, call: FrameworkCall) -> None:
        self.record = record
        self.call = call


class CallbackHandler(BaseCallbackHandler):
    """Capture LangChain runs as promptrail records (see the module).

    One handler may serve any number of concurrent runs; ``promptrail.instrument()``
    registers one for every run, so passing one by hand is only needed without it.
    """

    # Called in the caller's context (not in an executor), so the model run's FrameworkCall
    # and the context's user and metadata are those of the code that started the run.
    run_inline = True

    def __init__(self) -> None:
        self._nodes: dict[UUID, _Node] = {}
        self._models: dict[UUID, _ModelRun] = {}

    # -- where a run goes in the trace ------------------------------------------------------

    def _parent(self, parent_run_id: UUID | None) -> Context | None:
        node = self._nodes.get(parent_run_id) if parent_run_id is not None else None
        if node is None or node.span is None:
            return None  # a root run: under the current span (an @observe function, say)
        return trace.set_span_in_context(node.span)

    def _start_span(
        self,
        kind: str,
        name: str,
        inputs: Any,
        run_id: UUID,
        parent_run_id: UUID | None,
        tags: Sequence[str] | None,
    ) -> None:
        if tags and _HIDDEN in tags:
            parent = self._nodes.get(parent_run_id) if parent_run_id is not None else None
            self._nodes[run_id] = _Node(parent.span if parent else None, owned=False)
            return
        attributes = call_attributes(_no_texts)
        attributes[_genai.OBSERVATION] = kind
        span = _runtime.tracer().start_span(
            name, context=self._parent(parent_run_id), attributes=attributes
        )
        node = self._nodes[run_id] = _Node(span, owned=True)
        _describe(span, inputs)
        node.make_current(span)

    def _end_span(
        self, run_id: UUID, outputs: Any = None, error: BaseException | None = None
    ) -> None:
        node = self._nodes.pop(run_id, None)
        if node is None or not node.owned or node.span is None:
            return
        node.release()
        span = node.span
        if error is not None and _is_bubble_up(error):
            # LangGraph's control flow (an interrupt, a command to the parent graph): the
            # run stops here on purpose; what it stopped with is its output.
            outputs, error = _bubble_up_output(error), None
        if error is not None:
            if span.is_recording():
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        elif isinstance(span, CaptureSpan):
            inputs = span.describe
            span.describe = lambda: _with_output(inputs, outputs)
        elif span.is_recording():
            span.set_attribute(_genai.OUTPUT, to_json(_plain(outputs)))
        span.end()

    # -- chains (LangGraph graphs and nodes too), tools, retrievers --------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open the span of a chain, a LangGraph graph or node."""
        self._start_span("chain", _name(serialized, kwargs), inputs, run_id, parent_run_id, tags)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End a chain's span with its outputs."""
        self._end_span(run_id, outputs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End a chain's span as an error."""
        self._end_span(run_id, error=error)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open a tool's span."""
        arguments = inputs if inputs is not None else input_str
        self._start_span("tool", _name(serialized, kwargs), arguments, run_id, parent_run_id, tags)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End a tool's span with its output."""
        self._end_span(run_id, output)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End a tool's span as an error."""
        self._end_span(run_id, error=error)

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open a retriever's span."""
        name = _name(serialized, kwargs)
        self._start_span("retriever", name, {"query": query}, run_id, parent_run_id, tags)

    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """End a retriever's span with the documents found."""
        self._end_span(run_id, list(documents))

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End a retriever's span as an error."""
        self._end_span(run_id, error=error)

    # -- model calls ------------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open the record of a chat-model call."""
        # LangChain starts one run per message list; a run holds one.
        conversation = messages[0] if len(messages) == 1 else [m for ms in messages for m in ms]
        call_input = convert_to_openai_messages(conversation)
        self._start_model(run_id, parent_run_id, metadata, kwargs, "chat", call_input)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open the record of a (text) LLM call."""
        call_input = prompts[0] if len(prompts) == 1 else prompts
        self._start_model(run_id, parent_run_id, metadata, kwargs, "text_completion", call_input)

    def _start_model(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any] | None,
        kwargs: Mapping[str, Any],
        operation: str,
        call_input: Any,
    ) -> None:
        metadata = metadata or {}
        parameters = dict(kwargs.get("invocation_params") or {})
        model = (
            parameters.get("model") or parameters.get("model_name") or metadata.get("ls_model_name")
        )
        parameters["model"] = model if isinstance(model, str) else None
        provider = metadata.get("ls_provider") or parameters.get("_type") or "langchain"
        record = CallRecord(
            str(provider),
            operation,
            parameters,
            call_input,
            lambda: message_texts(call_input),
            parent=self._parent(parent_run_id),
        )
        call = FrameworkCall()
        call.enter()
        self._models[run_id] = _ModelRun(record, call)

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Note the first streamed token (time to first token)."""
        run = self._models.get(run_id)
        if run is not None:
            run.record.first_token()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """End a model call's record with its output and usage."""
        run = self._models.pop(run_id, None)
        if run is not None:
            run.call.close()
            run.record.done(_read_result, response)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End a model call's record as an error."""
        run = self._models.pop(run_id, None)
        if run is not None:
            run.call.close()
            run.record.fail(error)


def _is_bubble_up(error: BaseException) -> bool:
    """Whether ``error`` is LangGraph's ``GraphBubbleUp`` (found by name: no import of it)."""
    return any(
        cls.__name__ == "GraphBubbleUp" and cls.__module__.startswith("langgraph")
        for cls in type(error).__mro__
    )


def _bubble_up_output(error: BaseException) -> dict[str, Any]:
    """What a run stopped by LangGraph's control flow shows as output.

    An interrupt shows its values as the graph's own result does (``__interrupt__``).
    """
    interrupts = error.args[0] if error.args else None
    if type(error).__name__ == "GraphInterrupt" and isinstance(interrupts, list | tuple):
        return {"__interrupt__": [_plain(getattr(i, "value", i)) for i in interrupts]}
    return {"__bubble_up__": type(error).__name__}


def _name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    serialized = serialized or {}
    if isinstance(serialized.get("name"), str):
        return str(serialized["name"])
    path = serialized.get("id")
    return str(path[-1]) if isinstance(path, list) and path else "chain"


class _RunCurrent(StandInSpan):
    """The current span a run leaves in a context: its span until the run ends, then the
    span that was current before it (see :meth:`_Node.release`).

    Every operation goes to the span it stands for at the time (:class:`StandInSpan`), so
    parents, trace ids and what the application sets on the current span land where they
    would without it.
    """

    __slots__ = ("before", "finished", "span")

    def __init__(self, span: Span, before: Span) -> None:
        self.span = span
        self.before = before
        self.finished = False

    def finish(self) -> None:
        """Stand for ``before`` from now on (and hold the ended span no longer)."""
        self.span = self.before
        self.finished = True

    def _span(self) -> Span:
        return self.span


# -- what a span shows: worked out on the shipper's thread on promptrail's own spans -------


def _describe(span: Span, inputs: Any) -> None:
    # A shallow copy: the application (a LangGraph state, say) may change the dict later.
    inputs = dict(inputs) if isinstance(inputs, dict) else inputs
    if isinstance(span, CaptureSpan):
        span.describe = lambda: ({}, {_genai.INPUT_VARIABLES: _variables(inputs)})
    elif span.is_recording():
        span.set_attribute(_genai.INPUT_VARIABLES, to_json(_variables(inputs)))


def _with_output(inputs: Any, outputs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    attributes, json_attributes = inputs() if callable(inputs) else ({}, {})
    return attributes, {**json_attributes, _genai.OUTPUT: _plain(outputs)}


def _variables(inputs: Any) -> dict[str, Any]:
    plain = _plain(inputs)
    return plain if isinstance(plain, dict) else {"input": plain}


def _plain(value: Any, depth: int = 0) -> Any:
    """LangChain's objects (messages, documents, models) as JSON-able values."""
    if depth > _MAX_DEPTH:
        return repr(value)
    if isinstance(value, BaseMessage):
        return convert_to_openai_messages(value)
    if isinstance(value, Document):
        return {"page_content": value.page_content, "metadata": _plain(value.metadata, depth + 1)}
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(), depth + 1)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return value


def _read_result(record: CallRecord, response: LLMResult) -> None:
    """Take a model run's output, model, finish reason and usage (shipper's thread)."""
    generations = response.generations[0] if response.generations else []
    llm_output = response.llm_output or {}
    if generations:
        generation = generations[0]
        record.text.append(generation.text)
        info = generation.generation_info or {}
        message = getattr(generation, "message", None)
        response_metadata = getattr(message, "response_metadata", None) or {}
        record.model = response_metadata.get("model_name") or response_metadata.get("model")
        record.response_id = getattr(message, "id", None) or response_metadata.get("id")
        reason = info.get("finish_reason") or response_metadata.get("finish_reason")
        record.finish_reason = reason or response_metadata.get("stop_reason")
        usage = getattr(message, "usage_metadata", None)
        if usage:
            record.input_tokens = usage.get("input_tokens")
            record.output_tokens = usage.get("output_tokens")
    record.model = record.model or llm_output.get("model_name")
    token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
    if record.input_tokens is None and token_usage:
        record.input_tokens = token_usage.get("prompt_tokens", token_usage.get("input_tokens"))
        record.output_tokens = token_usage.get(
            "completion_tokens", token_usage.get("output_tokens")
        )


# -- registration: promptrail.instrument() ------------------------------------------------


class _GlobalHandler:
    """What LangChain's configure hook asks for every run: the handler, while instrumented.

    A ContextVar would hold the handler only in the context it was set in (not in threads
    started elsewhere); LangChain only calls ``get()`` on the hook, so a process-wide value
    behind the same method serves every thread and task.
    """

    handler: CallbackHandler | None = None

    def get(self) -> CallbackHandler | None:
        return self.handler


_hook = _GlobalHandler()
_registered = False


def instrument() -> None:
    """Capture every LangChain run (idempotent)."""
    global _registered
    if not _registered:
        hook = cast("ContextVar[CallbackHandler | None]", _hook)
        register_configure_hook(hook, inheritable=True, handle_class=CallbackHandler)
        _registered = True
    if _hook.handler is None:
        _hook.handler = CallbackHandler()


def uninstrument() -> None:
    """Stop capturing LangChain runs (handlers passed by hand keep working)."""
    _hook.handler = None
