"""``promptrail.otel.TimeOrderedIdGenerator`` in a real OpenTelemetry SDK tracer provider:
trace ids lead with the trace's start in ms, so the records' ids sort by time."""

from __future__ import annotations

import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from promptrail.otel import TimeOrderedIdGenerator


def test_traces_of_a_provider_with_the_generator_get_ids_in_time_order() -> None:
    provider = TracerProvider(id_generator=TimeOrderedIdGenerator())
    tracer = provider.get_tracer("test")
    seen: list[tuple[int, int, int, int]] = []
    for _ in range(3):
        before = time.time_ns() // 1_000_000
        with (
            tracer.start_as_current_span("call") as span,
            tracer.start_as_current_span("child") as child,
        ):
            context, inner = span.get_span_context(), child.get_span_context()
        seen.append((before, time.time_ns() // 1_000_000, context.trace_id, inner.span_id))
        assert inner.trace_id == context.trace_id and inner.span_id != context.span_id
        time.sleep(0.003)
    for before, after, trace_id, span_id in seen:
        assert before <= trace_id >> 80 <= after
        assert 0 < span_id < 1 << 64
    ids = [f"req_{trace_id:032x}{span_id:016x}" for _, _, trace_id, span_id in seen]
    assert ids == sorted(ids)
    provider.shutdown()


def test_ratio_sampling_still_keeps_about_its_share() -> None:
    # TraceIdRatioBased reads the low 64 bits, which stay random.
    sampler, generator = TraceIdRatioBased(0.25), TimeOrderedIdGenerator()
    kept = sum(
        sampler.should_sample(None, generator.generate_trace_id(), "s").decision.is_sampled()
        for _ in range(4000)
    )
    assert 800 < kept < 1200
