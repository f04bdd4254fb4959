"""pydantic-ai: its agent runs and tool calls as the parents of the provider records.

    import promptrail
    promptrail.init()
    promptrail.instrument()   # with pydantic-ai installed: Agent.instrument_all(...) to promptrail

pydantic-ai describes its work as OpenTelemetry GenAI spans (``invoke_agent``,
``execute_tool``, and a ``chat`` span per model request). ``instrument()`` hands every agent a
tracer provider of promptrail's (``Agent.instrument_all``): agent and tool spans become
records (a tool's arguments and result, an agent's final result), parents of what runs inside
them in one trace. The model requests are recorded by the ``openai`` / ``anthropic`` patches,
once each: pydantic-ai's own ``chat`` span is not recorded (it would be a second copy of the
same call) and the provider call's record nests under the agent span instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanKind
from opentelemetry.util._decorator import _agnosticcontextmanager
from opentelemetry.util.types import Attributes, AttributeValue
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings

from promptrail import _genai, _runtime
from promptrail._context import call_attributes, to_json

from ._stand_in import StandInSpan

# Model requests: the provider patches record these calls.
_MODEL_OPERATIONS = frozenset(("chat", "text_completion", "generate_content", "embeddings"))
_KINDS = {"invoke_agent": "agent", "execute_tool": "tool"}
_INPUTS = frozenset(("tool_arguments", "gen_ai.tool.call.arguments"))
_OUTPUTS = frozenset(("tool_response", "gen_ai.tool.call.result", "final_result"))


def _no_texts() -> list[str]:
    return []


class _Span(StandInSpan):
    """A promptrail span that keeps only what a record shows of pydantic-ai's attributes.

    pydantic-ai puts the model, usage and messages of the whole run on its agent span; as
    they are, that span would read as one more model call, with the run's tokens counted a
    second time. Tool arguments and results, and the agent's final result, are kept. What it
    does not filter goes to the span it wraps (:class:`StandInSpan`, standing for one span).
    """

    def __init__(self, inner: Span) -> None:
        self._inner = inner

    def _span(self) -> Span:
        return self._inner

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if key in _INPUTS:
            text = value if isinstance(value, str) and value.startswith("{") else None
            self._inner.set_attribute(_genai.INPUT_VARIABLES, text or to_json({"arguments": value}))
        elif key in _OUTPUTS:
            self._inner.set_attribute(_genai.OUTPUT, to_json(value))

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        """Events (pydantic-ai's message events) are not part of a record."""

    def add_link(self, context: trace.SpanContext, attributes: Attributes = None) -> None:
        """Links are not part of a record."""


class _Tracer(trace.Tracer):
    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        given = dict(attributes or {})
        operation = given.get("gen_ai.operation.name")
        if operation in _MODEL_OPERATIONS:
            # Not recorded: current in its place, the parent's context, so the provider
            # call's record nests under the agent (or tool) span.
            return NonRecordingSpan(trace.get_current_span(context).get_span_context())
        recorded = call_attributes(_no_texts)
        recorded[_genai.OBSERVATION] = _KINDS.get(str(operation), "pydantic_ai")
        inner = _runtime.tracer().start_span(
            name, context=context, kind=kind, attributes=recorded, start_time=start_time
        )
        span = _Span(inner)
        span.set_attributes(given)
        return span

    @_agnosticcontextmanager
    def start_as_current_span(
        self, name: str, *args: Any, end_on_exit: bool = True, **kwargs: Any
    ) -> Iterator[Span]:
        with trace.use_span(
            self.start_span(name, *args, **kwargs), end_on_exit=end_on_exit
        ) as span:
            yield span


class _TracerProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Tracer()


def instrument() -> None:
    """Send every pydantic-ai agent's spans to promptrail (replaces other ``instrument_all``)."""
    Agent.instrument_all(InstrumentationSettings(tracer_provider=_TracerProvider()))


def uninstrument() -> None:
    """Stop instrumenting pydantic-ai agents."""
    Agent.instrument_all(False)
