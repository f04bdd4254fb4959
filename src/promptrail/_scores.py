"""``promptrail.score``, ``current_trace_id``, ``last_request_id`` and ``feedback_token``.

``score()`` is called in the application's request path, so it does in the caller's thread
only what cannot wait: check its arguments (cheap type checks; a bad call is logged once per
kind of mistake and counted as dropped, never raised), pick the target (the current trace when
none is given), give the score its id, and append it to the score queue (the shipper of
:mod:`._capture.shipping`, posting to the ``SCORES`` endpoint of :mod:`._capture.endpoints`).
Everything else (JSON, gzip, the post and its retries) happens on the shipper's thread.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace

from . import _runtime
from ._capture.spans import CaptureSpan, last_record
from ._feedback import DEFAULT_TTL_SECONDS, mint
from ._genai import record_id
from ._observe import last_model_call
from ._score_rules import (
    DATA_TYPES,
    DataType,
    infer_data_type,
    name_problem,
    score_id_problem,
    target_problem,
    value_problem,
)

logger = logging.getLogger("promptrail")

_getrandbits = random.getrandbits  # reseeded in a forked child, as span ids are
_get_current_span = trace.get_current_span
_warned: set[str] = set()


def current_trace_id() -> str | None:
    """The 32-hex id of the trace being recorded here, else None.

    Inside a function decorated with ``@promptrail.observe`` (or any OpenTelemetry span that
    is current, e.g. one of your own or a framework's), the trace its records carry;
    ``promptrail.score(...)`` scores that trace when given no ``request_id``/``trace_id``.
    A ``promptrail.context()`` block alone starts no trace (it labels records), so inside
    one with no span around it this is None.

    >>> @promptrail.observe
    ... def answer(question: str) -> str:
    ...     trace_id = promptrail.current_trace_id()   # "4bf92f3577b34da6a3ce929d0e0e4736"
    """
    trace_id = _trace_id_here()
    return None if trace_id is None else f"{trace_id:032x}"


def _trace_id_here() -> int | None:
    span = _get_current_span()
    if type(span) is CaptureSpan:  # promptrail's own span: no SpanContext to build
        return span.trace_id
    context = span.get_span_context()
    return context.trace_id if context.is_valid else None


def last_request_id() -> str | None:
    """The id of the last model call captured in this thread or asyncio task, else None.

    That is the id the collector stores the call's record under (``req_<trace><span>``),
    known at once, before the record is shipped: score it, or mint a feedback token for it,
    right after the call. The span of an ``@promptrail.observe`` function is not a model
    call: after such a function returns, this is still the last model call made in it (or
    before it), so a thumbs on it lands on a record the request log shows. Each thread and
    each asyncio task has its own (a task started after a capture inherits the id until it
    captures one itself). A record dropped by ``init(sample_rate=...)`` still has an id
    here, but is never stored.

    >>> @promptrail.observe
    ... def answer(question: str) -> str: ...   # calls openai, captured by instrument()
    >>> answer("capital of France?")
    >>> promptrail.score("helpful", True, request_id=promptrail.last_request_id())
    """
    last = last_model_call()
    return None if last is None else record_id(*last)


def last_record_id() -> str | None:
    """The id of the last record of any kind (a model call or a span) ended here, else None."""
    last = last_record.get()
    return None if last is None else record_id(*last)


def score(
    name: str,
    value: bool | float | str,
    *,
    request_id: str | None = None,
    trace_id: str | None = None,
    comment: str | None = None,
    correction: str | None = None,
    id: str | None = None,
    data_type: DataType | None = None,
    metadata: Mapping[str, Any] | None = None,
    session_id: str | None = None,
) -> None:
    """Score a record (``request_id``), a trace (``trace_id``) or a session (``session_id``,
    the ``metadata.session_id`` its records carry: a whole conversation); queued and shipped
    in the background like records, never raising, never waiting on the network.

    With no target, inside ``@promptrail.observe`` (or another current span) the score is on
    the current trace. ``value``: a number, True/False or a category; ``data_type``
    defaults from it. ``correction``: what the output should have been. ``id``: your own
    (1-128 of ``[A-Za-z0-9_.:-]``) to replace a score later; one is made otherwise, so a
    resent batch never stores a score twice. A bad call is logged once (per kind of mistake)
    and counted in ``promptrail.stats()["scores"]["dropped"]["invalid"]``.

    >>> promptrail.score("thumbs", False, request_id=promptrail.last_request_id(),
    ...                  comment="wrong city", correction="Paris")
    """
    try:
        shipper = _runtime.score_shipper()
        if shipper is None:  # init(enabled=False): nothing is captured, nothing scored
            return
        if request_id is None and trace_id is None and session_id is None:
            current = _trace_id_here()
            if current is not None:
                trace_id = f"{current:032x}"
        problem = (
            name_problem(name)
            or (
                target_problem(request_id, trace_id)
                if session_id is None
                else _session_problem(session_id, request_id, trace_id)
            )
            or _value_problem(value, data_type)
            or _text_problem(comment, correction, metadata)
            or (None if id is None else score_id_problem(id))
        )
        if problem is not None:
            _refuse(problem)
            return
        item: dict[str, Any] = {
            "id": id or f"score_{_getrandbits(128):032x}",
            "name": name,
            "value": value,
            "source": "sdk",
        }
        if session_id is not None:
            item["session_id"] = session_id
        elif request_id is not None:
            item["request_id"] = request_id
        else:
            item["trace_id"] = trace_id
        if data_type is not None:
            item["data_type"] = data_type
        if comment is not None:
            item["comment"] = comment
        if correction is not None:
            item["correction"] = correction
        if metadata:
            item["metadata"] = dict(metadata)  # the caller may change theirs afterwards
        shipper.put(item)
    except Exception:  # scoring never breaks the caller's code
        logger.debug("promptrail: score() failed", exc_info=True)


def feedback_token(
    name: str,
    *,
    request_id: str | None = None,
    trace_id: str | None = None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    data_type: DataType | None = None,
    categories: Sequence[str] | None = None,
) -> str:
    """Mint a feedback token here, with no round trip: an end user posts one score with it.

    Scoped to one record (``request_id``) or trace (``trace_id``; with neither, the current
    trace as for :func:`score`) and one score ``name``, good for ``ttl_seconds`` (1 s to 30
    days) and refused once the API key that signed it (``init(api_key=...)`` or
    ``PROMPTRAIL_API_KEY``) is revoked. ``data_type`` and ``categories`` narrow the values the
    token takes. The browser posts ``{"value", "comment"?, "correction"?}`` to
    ``<collector>/v1/feedback/<token>`` with no key; posting again replaces the vote. Raises
    ValueError for bad arguments or when there is no API key.

    >>> token = promptrail.feedback_token("thumbs", request_id=promptrail.last_request_id())
    """
    if request_id is None and trace_id is None:
        trace_id = current_trace_id()
    return mint(
        _runtime.configured_api_key(),
        name,
        request_id=request_id,
        trace_id=trace_id,
        data_type=data_type,
        categories=categories,
        ttl_seconds=ttl_seconds,
    )


# The longest session id a score takes: as the collector's session page path does.
_SESSION_ID_MAX_CHARS = 1000


def _session_problem(session_id: object, request_id: object, trace_id: object) -> str | None:
    """Why a score on ``session_id`` would be refused: another target beside it, or no id of
    1 to 1000 characters (the collector's own rule)."""
    if request_id is not None or trace_id is not None:
        return "give exactly one of request_id, trace_id and session_id"
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= _SESSION_ID_MAX_CHARS:
        return f"session_id must be a string of 1 to {_SESSION_ID_MAX_CHARS} characters"
    return None


def _value_problem(value: object, data_type: object) -> str | None:
    if not isinstance(value, bool | int | float | str):
        return "value must be a number, True/False or a string"
    if data_type is not None and data_type not in DATA_TYPES:
        return f"data_type must be one of {', '.join(DATA_TYPES)}"
    # The collector's own rule: what it would refuse is dropped here, before the queue.
    return value_problem(value, str(data_type or infer_data_type(value)))


def _text_problem(comment: object, correction: object, metadata: object) -> str | None:
    if comment is not None and not isinstance(comment, str):
        return "comment must be a string"
    if correction is not None and not isinstance(correction, str):
        return "correction must be a string"
    if metadata is not None and not isinstance(metadata, Mapping):
        return "metadata must be a mapping"
    return None


def _refuse(problem: str) -> None:
    """Count a bad score as dropped; say why the first time this kind of mistake is made."""
    _runtime.score_dropped("invalid")
    if problem not in _warned:
        _warned.add(problem)
        logger.warning(
            "promptrail: score dropped: %s (this mistake is logged once; counted in "
            "promptrail.stats()['scores'])",
            problem,
        )
