"""Turn a span (from the SDK, or OTLP) into a request record.

Shared by the SDK's exporter and the collector's OTLP ingest, so a span means the same record
whichever way it travels. It reads every generation of GenAI attributes still emitted: the
current semantic conventions (``gen_ai.provider.name``, ``gen_ai.input.messages`` JSON,
``gen_ai.usage.input_tokens``…), the deprecated ones (``gen_ai.system``, ``gen_ai.prompt.N.*``,
``gen_ai.completion.N.*``, ``gen_ai.usage.prompt_tokens``), OpenInference's ``llm.*``, and
promptrail's own ``promptrail.*``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

import msgspec

# promptrail's own span attributes.
OBSERVATION = "promptrail.observation"
PROMPT_NAME = "promptrail.prompt.name"
PROMPT_VERSION = "promptrail.prompt.version"
INPUT_VARIABLES = "promptrail.input_variables"
METADATA = "promptrail.metadata"
CALL_INPUT = "promptrail.input"
OUTPUT = "promptrail.output"
TIME_TO_FIRST_TOKEN = "promptrail.time_to_first_token_ms"
COST = "promptrail.cost_usd"
# The record's kind (docs/api-notes.md, "Traces, sessions and users"), when the span says it
# outright (``@observe(kind=...)``).
KIND = "promptrail.kind"

# The usage details the SDK's patches set (the semantic conventions' names), all counted inside
# gen_ai.usage.input_tokens / output_tokens: prompt tokens read from and written to the
# provider's prompt cache, output tokens spent reasoning.
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"

# What a record can be: a model call, an embedding, or one of the span kinds.
KINDS = frozenset(("llm", "embedding", "chain", "agent", "tool", "retriever", "span"))
# OpenInference's span kinds (``openinference.span.kind``) as record kinds.
_OPENINFERENCE_KINDS = {
    "LLM": "llm",
    "EMBEDDING": "embedding",
    "CHAIN": "chain",
    "AGENT": "agent",
    "TOOL": "tool",
    "RETRIEVER": "retriever",
    "RERANKER": "retriever",
}
# GenAI operations (``gen_ai.operation.name``) as record kinds; other operations are model calls.
_OPERATION_KINDS = {
    "embeddings": "embedding",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
}
# What the integrations put in ``promptrail.observation`` as record kinds; any other value
# (an @observe function, a LlamaIndex or pydantic-ai step) is a plain span.
_OBSERVATION_KINDS = {"chain": "chain", "agent": "agent", "tool": "tool", "retriever": "retriever"}

_INDEXED = re.compile(
    r"^(gen_ai\.(?:prompt|completion)|llm\.(?:input|output)_messages)\.(\d+)\.(.+)$"
)


def record_id(trace_id: int, span_id: int) -> str:
    """Return the record id of a span: stable, so a re-sent span is stored once."""
    return f"req_{trace_id:032x}{span_id:016x}"


def is_genai(attributes: Mapping[str, Any]) -> bool:
    """Whether a span describes a model call (any attribute generation)."""
    return any(
        key.startswith(("gen_ai.", "llm.")) or key == "openinference.span.kind"
        for key in attributes
    )


def is_recordable(attributes: Mapping[str, Any]) -> bool:
    """Whether a span becomes a record: model calls, and promptrail's observed functions."""
    return OBSERVATION in attributes or is_genai(attributes)


def span_error(status_message: str, exception_messages: Iterable[str]) -> str:
    """A record's error text: the span's status message, else its exception events' messages
    (``exception_messages`` is read only when the status gives none)."""
    return status_message or "; ".join(exception_messages)


_PROMPT_TOKENS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_COMPLETION_TOKENS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
# Each usage detail of a record and the attributes that give it (the semantic conventions'
# names, then OpenLLMetry's and OpenInference's).
_USAGE_DETAILS = (
    (
        "cached_tokens",
        (
            CACHE_READ_TOKENS,
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        ),
    ),
    (
        "cache_write_tokens",
        (
            CACHE_WRITE_TOKENS,
            "gen_ai.usage.cache_creation_input_tokens",
            "llm.token_count.prompt_details.cache_write",
        ),
    ),
    (
        "reasoning_tokens",
        (
            REASONING_TOKENS,
            "gen_ai.usage.reasoning_tokens",
            "llm.token_count.completion_details.reasoning",
        ),
    ),
)
_USAGE_DETAIL_KEYS = frozenset(key for _, keys in _USAGE_DETAILS for key in keys)
_MODELS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_PROVIDERS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_FUNCTION_KEYS = frozenset(
    (OBSERVATION, PROMPT_NAME, PROMPT_VERSION, INPUT_VARIABLES, METADATA, OUTPUT, KIND)
)


def record_kind(attrs: Mapping[str, Any]) -> str:
    """Return the kind of the record a span becomes (docs/api-notes.md, "Traces, sessions and
    users").

    An explicit ``promptrail.kind`` wins; then OpenInference's span kind, then the GenAI
    operation, then what an integration's span says it is; a span with none of them that is
    recorded at all is a model call.
    """
    get = attrs.get
    given = get(KIND)
    if given in KINDS:
        return str(given)
    inference = get("openinference.span.kind")
    if isinstance(inference, str):
        kind = _OPENINFERENCE_KINDS.get(inference.upper())
        if kind is not None:
            return kind
        return "span"  # a guardrail, an evaluator...: not a model call
    operation = get("gen_ai.operation.name")
    if isinstance(operation, str):
        return _OPERATION_KINDS.get(operation, "llm")
    observation = get(OBSERVATION)
    if observation is not None:
        return _OBSERVATION_KINDS.get(str(observation), "span")
    return "llm"


def build_record(
    name: str,
    trace_id: int,
    span_id: int,
    parent_span_id: int | None,
    start_ns: int,
    end_ns: int,
    attrs: Mapping[str, Any],
    is_error: bool,
    error: str,
) -> dict[str, Any]:
    """Return the request record (the JSON of ``POST /v1/requests``) of a span, from its
    parts (``error``: :func:`span_error`).

    The SDK's exporter and the collector's OTLP route both call it straight from their spans:
    it runs once per record, on the export thread (which shares the GIL with the application)
    or in the ingest.
    """
    get = attrs.get
    trace_hex = f"{trace_id:032x}"
    span_hex = f"{span_id:016x}"
    variables = get(INPUT_VARIABLES)
    metadata = get(METADATA)
    # An observed function's span carries promptrail's keys alone: no model, provider,
    # tokens or call input to look for (each lookup below would come back empty).
    plain = attrs.keys() <= _FUNCTION_KEYS
    record: dict[str, Any] = {
        "id": f"req_{trace_hex}{span_hex}",
        "created_at": _iso(start_ns),
        "prompt_name": str(get(PROMPT_NAME, "")),
        "model": "" if plain else _first_str(attrs, _MODELS),
        "provider": "" if plain else _first_str(attrs, _PROVIDERS),
        "status": "error" if is_error else "success",
        "input_variables": {} if variables is None else _json_object(variables),
        "metadata": {} if metadata is None else _json_object(metadata),
        "output": _output(attrs),
        "usage": {
            "prompt_tokens": 0 if plain else _first_int(attrs, _PROMPT_TOKENS),
            "completion_tokens": 0 if plain else _first_int(attrs, _COMPLETION_TOKENS),
        },
        "latency_ms": max(0, (end_ns - start_ns) // 1_000_000),
        "trace_id": trace_hex,
        "span_id": span_hex,
        "parent_span_id": f"{parent_span_id:016x}" if parent_span_id else None,
        "span_name": name,
        "kind": record_kind(attrs),
    }
    # Most spans carry no usage detail: one set test finds that out without a lookup each.
    if not plain and not _USAGE_DETAIL_KEYS.isdisjoint(attrs):
        usage = record["usage"]
        for detail, keys in _USAGE_DETAILS:
            count = _first_int(attrs, keys)
            if count:
                usage[detail] = count
    version = get(PROMPT_VERSION)
    if isinstance(version, int) and version > 0:
        record["version"] = version
    call_input = None if plain else _input(attrs)
    if call_input is not None:
        record["input"] = call_input
    ttft = get(TIME_TO_FIRST_TOKEN)
    if ttft is not None and _is_number(ttft):
        record["time_to_first_token_ms"] = int(ttft)
    cost = get(COST)
    if cost is not None and _is_number(cost):
        record["usage"]["estimated_cost_usd"] = float(cost)
    if error or is_error:
        record["error"] = error or "error"
    return record


# What a model call's span may carry besides the call's own fields: a template's or an observed
# function's linkage (``_context.call_attributes``).
LINK_KEYS = frozenset((PROMPT_NAME, PROMPT_VERSION, INPUT_VARIABLES, METADATA))


def model_call_record(
    name: str,
    trace_id: int,
    span_id: int,
    parent_span_id: int | None,
    start_ns: int,
    end_ns: int,
    linked: Mapping[str, Any],
    is_error: bool,
    error: str,
    operation: str,
    provider: Any,
    models: tuple[Any, Any],
    output: dict[str, Any],
    counts: tuple[Any, Any, Any, Any, Any],
    first_token_ns: int | None,
    call_input: Any,
) -> dict[str, Any]:
    """The record :func:`build_record` gives a captured model call's span, from the call's
    own fields instead of its attributes (``linked``: only :data:`LINK_KEYS`).

    It runs once per call on the shipper's thread, which shares the GIL with the
    application: going through the attributes (a dict of them, each looked up again under
    every generation's names, the output and input as JSON and back) cost ~13 µs a streamed
    call, this ~4 (docs/benchmarks.md, "SDK overhead, black-box harness"). ``models``: the
    response's model, then the request's; ``output``: ``{"content": ..., "finish_reason": ...}``
    as the output messages give it (the caller checks they need no JSON round trip);
    ``counts``: input, output, cached, cache-write and reasoning tokens, as the call read
    them; ``call_input``: the ``promptrail.input`` attribute's value (JSON values).
    ``tests/sdk/test_direct_call_record.py`` holds the two to the same record.
    """
    get = linked.get
    trace_hex = f"{trace_id:032x}"
    span_hex = f"{span_id:016x}"
    variables = get(INPUT_VARIABLES)
    metadata = get(METADATA)
    model = ""
    for value in models:  # _first_str over gen_ai.response.model, gen_ai.request.model
        if isinstance(value, str) and value:
            model = value
            break
    prompt, completion, cached, cache_write, reasoning = counts
    usage: dict[str, Any] = {
        "prompt_tokens": _count(prompt),
        "completion_tokens": _count(completion),
    }
    if cached or cache_write or reasoning:  # a detail's attribute is set only when non-zero
        for detail, count in (
            ("cached_tokens", cached),
            ("cache_write_tokens", cache_write),
            ("reasoning_tokens", reasoning),
        ):
            count = _count(count)
            if count:
                usage[detail] = count
    record: dict[str, Any] = {
        "id": f"req_{trace_hex}{span_hex}",
        "created_at": _iso(start_ns),
        "prompt_name": str(get(PROMPT_NAME, "")),
        "model": model,
        "provider": provider if isinstance(provider, str) else "",
        "status": "error" if is_error else "success",
        "input_variables": {} if variables is None else _json_object(variables),
        "metadata": {} if metadata is None else _json_object(metadata),
        "output": output,
        "usage": usage,
        "latency_ms": max(0, (end_ns - start_ns) // 1_000_000),
        "trace_id": trace_hex,
        "span_id": span_hex,
        "parent_span_id": f"{parent_span_id:016x}" if parent_span_id else None,
        "span_name": name,
        "kind": _OPERATION_KINDS.get(operation, "llm"),
    }
    version = get(PROMPT_VERSION)
    if isinstance(version, int) and version > 0:
        record["version"] = version
    if call_input is not None:
        record["input"] = call_input
    if first_token_ns is not None:
        record["time_to_first_token_ms"] = max(0, (first_token_ns - start_ns) // 1_000_000)
    if error or is_error:
        record["error"] = error or "error"
    return record


def _count(value: Any) -> int:
    """A token count as :func:`_first_int` reads its one attribute (0 when it is no number)."""
    if type(value) is int:
        return max(0, value)
    if value is not None and _is_number(value):
        return max(0, int(value))
    return 0


# Records of one export mostly start within the same second: format that part once.
_last_second: tuple[int, str] = (-1, "")


def _iso(ns: int) -> str:
    """``datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds")``, cheaper.

    Same arithmetic as ``fromtimestamp`` (float seconds, microseconds rounded half-even),
    so the text is identical; only the date-and-time part is cached per second.
    """
    global _last_second
    fraction, whole = math.modf(ns / 1e9)
    micros = round(fraction * 1e6)
    seconds = int(whole)
    if micros >= 1_000_000:
        seconds += 1
        micros -= 1_000_000
    last = _last_second
    if last[0] != seconds:
        last = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        _last_second = last
    return f"{last[1]}.{micros // 1000:03d}+00:00"


def _first_str(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _first_int(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = attrs.get(key)
        if type(value) is int:  # the common case, spared _is_number's tests
            return max(0, value)
        if value is not None and _is_number(value):
            return max(0, int(value))
    return 0


def _is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float (not a bool): NaN and infinities have no integer value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


# The compiled scanner ``json.loads`` runs (the default decoder's), and the whitespace JSON
# allows around a value: _loads calls them itself, sparing json.loads' layers of Python
# (about half of its time on a message list of a few hundred characters).
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_space = re.compile(r"[ \t\n\r]*").match  # json.decoder.WHITESPACE
_fast_decode = msgspec.json.Decoder().decode
# Text with fewer opening brackets cannot nest near the recursion limit (1,000 by default).
_SHALLOW = 400


def _loads(value: Any) -> Any:
    """``json.loads(value)`` for text that is JSON, else ``value`` as it is."""
    if isinstance(value, str):
        try:
            return _parse(value)
        # Not JSON (StopIteration: no value where one should start), or nested too deep.
        except (ValueError, StopIteration, RecursionError):
            return value
    return value


def _parse(text: str) -> Any:
    """``json.loads(text)``: the same values, the same refusals (as ValueError).

    msgspec's compiled decoder reads most text several times faster. What it reads it reads
    as ``json.loads`` does (the same ints, floats to the bit, strings, last of duplicate
    keys); what it refuses and ``json.loads`` takes (NaN and infinities, numbers out of
    float range, escaped lone surrogates) goes to ``json``'s own scanner. Only text that may
    nest near the interpreter's recursion limit, where the two could stop at different
    depths, skips msgspec.
    """
    if text.count("[") + text.count("{") < _SHALLOW:
        try:
            return _fast_decode(text)
        except (msgspec.MsgspecError, ValueError):
            pass
    if text.startswith("\ufeff"):
        raise ValueError("Unexpected UTF-8 BOM")
    start = 0 if text[:1] in _OPENERS else _after_space(text, 0)
    parsed, end = _scan(text, start)
    if end != len(text) and _after_space(text, end) != len(text):
        raise ValueError("Extra data")
    return parsed


def _after_space(text: str, at: int) -> int:
    match = _space(text, at)
    return match.end() if match else at  # always a match, maybe empty


# What JSON text mostly starts with: no whitespace to skip first.
_OPENERS = frozenset('[{"')


def _json_object(value: Any) -> dict[str, Any]:
    parsed = _loads(value)
    return parsed if isinstance(parsed, dict) else {}


_INDEXED_STARTS = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
)


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Collect ``prefix.N.key`` attributes into a list of dicts ordered by N."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        # A plain prefix test first: most keys are not indexed, and the regex costs more.
        if not key.startswith(_INDEXED_STARTS):
            continue
        match = _INDEXED.match(key)
        if match and match.group(1) == prefix:
            sub = match.group(3).removeprefix("message.")
            items.setdefault(int(match.group(2)), {})[sub] = value
    return [items[i] for i in sorted(items)]


def _input(attrs: Mapping[str, Any]) -> Any:
    if CALL_INPUT in attrs:
        return _loads(attrs[CALL_INPUT])
    if "gen_ai.input.messages" in attrs:
        return _loads(attrs["gen_ai.input.messages"])
    for prefix in ("gen_ai.prompt", "llm.input_messages"):
        messages = _indexed(attrs, prefix)
        if messages:
            return messages
    if "input.value" in attrs:
        return _loads(attrs["input.value"])
    return None


def _text_of(message: Any) -> str:
    """Text of a message in any shape: content string, parts, or content blocks."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("parts", content if isinstance(content, list) else [])
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        text = part.get("content", part.get("text")) if isinstance(part, dict) else None
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)


def _output(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if OUTPUT in attrs:
        value = _loads(attrs[OUTPUT])
        if isinstance(value, dict):
            return value
        return {"content": value if isinstance(value, str) else json.dumps(value)}
    messages: Any = None
    if "gen_ai.output.messages" in attrs:
        messages = _loads(attrs["gen_ai.output.messages"])
    else:
        for prefix in ("gen_ai.completion", "llm.output_messages"):
            messages = _indexed(attrs, prefix) or None
            if messages:
                break
    if messages is None and "output.value" in attrs:
        value = _loads(attrs["output.value"])
        return value if isinstance(value, dict) else {"content": str(value)}
    output: dict[str, Any] = {}
    if isinstance(messages, list) and messages:
        output["content"] = "".join([_text_of(m) for m in messages])
        first = messages[0]
        if isinstance(first, dict) and first.get("finish_reason"):
            output["finish_reason"] = first["finish_reason"]
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if (
        "finish_reason" not in output
        and isinstance(reasons, Sequence)
        and not isinstance(reasons, str)
        and reasons
    ):
        output["finish_reason"] = reasons[0]
    response_id = attrs.get("gen_ai.response.id")
    if isinstance(response_id, str):
        output["response_id"] = response_id
    return output
