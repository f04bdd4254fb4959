"""Shipping ``promptrail.score()``: the span shipper's queue and thread, posting scores.

Scores go out as records do (docs/sdk.md, "Scores and feedback"): :class:`ScoreShipper` is the
span shipper (bounded queue, one background thread, flush and bounded shutdown) and
:class:`ScoreExporter` the record exporter pointed at ``/v1/scores/batch``, so a score gets the
same buffer while the collector is down, the same retries with backoff and ``Retry-After``,
and the same counted drops. Every score carries its own ``id``, so a resent batch is stored
once. The caller's thread only wraps a ready dict and appends it to the queue.
"""

from __future__ import annotations

from typing import Any

from ._send import RecordSender
from ._shipping import SpanShipper

# What a queued score holds (its dict, id and name strings, the wrapper), rounded up from
# sys.getsizeof; plus its text again, as for spans. A span's estimate (1.5 KB fixed) would
# let a budget hold less than half the scores it can.
_SCORE_FIXED_BYTES = 768
_SCORE_TEXT_FACTOR = 1.5
# A score's JSON until some are encoded (an id, a name, a value, a record id: ~150 bytes).
_TYPICAL_SCORE_BYTES = 200


class ScoreExporter(RecordSender):
    """The record exporter's buffering, retries and counting, posting to /v1/scores/batch."""

    _path = "/v1/scores/batch"
    _body_key = b"scores"
    _noun = "scores"
    _warn_without_key = False  # the record exporter made with it already says so

    @property
    def mean_record_bytes(self) -> int:
        """The mean size of the scores encoded so far (a typical score's until there are some)."""
        if not self._encoded_records:
            return _TYPICAL_SCORE_BYTES
        return super().mean_record_bytes


class QueuedScore:
    """A score waiting in the shipper's queue (shipped as it is)."""

    __slots__ = ("_item",)

    trace_id = 0  # the score shipper keeps every score (it samples nothing)

    def __init__(self, item: dict[str, Any]) -> None:
        self._item = item

    def to_record(self) -> dict[str, Any]:
        """The score's JSON item for ``POST /v1/scores/batch``."""
        return self._item


class ScoreShipper(SpanShipper):
    """Queue scores (from any thread) and post them in the background."""

    _thread_name = "promptrail-scores"
    _noun = "scores"

    @property
    def exporter(self) -> RecordSender:
        """The exporter posting the scores (its ``pending`` wait for the collector)."""
        return self._exporter

    @property
    def idle(self) -> bool:
        """Whether every score queued so far is settled (nothing to flush or send at exit)."""
        return not self._queue and not self._exporter.pending

    def _learn_size(self) -> None:
        mean = self._exporter.mean_record_bytes
        self._span_bytes = _SCORE_FIXED_BYTES + int(_SCORE_TEXT_FACTOR * mean)

    def put(self, item: dict[str, Any]) -> None:
        """Queue one score (the caller's thread: keep it cheap)."""
        self.on_end(QueuedScore(item))
