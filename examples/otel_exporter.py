"""Use promptrail as an OpenTelemetry exporter in your own tracer provider.

    export PROMPTRAIL_API_KEY=pr-...           # the key `make run` printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/otel_exporter.py

PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini). Any instrumentation that emits
GenAI spans works; here OpenLLMetry's ``opentelemetry-instrumentation-openai``. Spans that are
not model calls are ignored.

Alternatively point any OTLP/HTTP exporter at the collector's ``/v1/traces``:
``OTLPSpanExporter(endpoint="http://127.0.0.1:8000/v1/traces",
headers={"Authorization": "Bearer pr-..."})``.
"""

from __future__ import annotations

import os

import openai
from opentelemetry import trace
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from promptrail.otel import PromptrailSpanExporter, TimeOrderedIdGenerator

# Trace ids that lead with their start time: record ids then sort by time (faster reads).
provider = TracerProvider(id_generator=TimeOrderedIdGenerator())
provider.add_span_processor(BatchSpanProcessor(PromptrailSpanExporter()))
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument(tracer_provider=provider)

with trace.get_tracer("my-app").start_as_current_span("handle-request"):
    reply = openai.OpenAI().chat.completions.create(
        model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
        messages=[{"role": "user", "content": "One word for 'telemetry'?"}],
    )
    print(reply.choices[0].message.content)

provider.shutdown()  # flushes the exporter
