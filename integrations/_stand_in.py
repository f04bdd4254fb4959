"""A span that stands for another one, chosen anew at every use.

Integrations leave one current in OpenTelemetry when the span a piece of work should nest
under depends on when it is asked (a stream's span only while the stream runs, a LangChain
run's span only until the run ends), because the callbacks that would switch it cannot
always run in the context where it was made current.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AnyValue, Attributes


class StandInSpan(Span):
    """Every operation goes to :meth:`_span`, the span this one stands for at the time."""

    def _span(self) -> Span:
        raise NotImplementedError

    def get_span_context(self) -> SpanContext:
        """The context of the span this one stands for now."""
        return self._span().get_span_context()

    def is_recording(self) -> bool:
        """Whether the span this one stands for records."""
        return self._span().is_recording()

    def end(self, end_time: int | None = None) -> None:
        """End the span this one stands for."""
        self._span().end(end_time)

    def set_attributes(self, attributes: Mapping[str, AnyValue]) -> None:
        """Set attributes on the span this one stands for."""
        self._span().set_attributes(attributes)

    def set_attribute(self, key: str, value: AnyValue) -> None:
        """Set an attribute on the span this one stands for."""
        self._span().set_attribute(key, value)

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        """Add an event to the span this one stands for."""
        self._span().add_event(name, attributes, timestamp)

    def update_name(self, name: str) -> None:
        """Rename the span this one stands for."""
        self._span().update_name(name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the status of the span this one stands for."""
        self._span().set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Record an exception on the span this one stands for."""
        self._span().record_exception(exception, attributes, timestamp, escaped)
