"""What a capture pipeline ships, and where: records to ``/v1/requests/batch``, scores to
``/v1/scores/batch``.

The sender, the shipper and the spool are the same code for both; an :class:`Endpoint`
describes the only things that differ between them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """One kind of item a pipeline ships."""

    path: str  # the batch route the items are posted to
    body_key: bytes  # the key of the posted body holding the items
    kind: str  # what log lines call the items; the spool's directory for them
    thread_name: str  # the shipper's background thread
    # An item's JSON until some are encoded, and what a queued item holds in memory besides
    # its text (rounded up from tracemalloc's figures, docs/benchmarks.md, "Burst"): the
    # shipper's memory budget estimates from both.
    typical_bytes: int
    queued_fixed_bytes: int
    # Whether a missing API key is worth its own warning (the score pipeline leaves it to the
    # record pipeline made beside it: one warning, not two).
    warn_without_key: bool = True


RECORDS = Endpoint(
    path="/v1/requests/batch",
    body_key=b"records",
    kind="records",
    thread_name="promptrail-shipper",
    typical_bytes=600,  # a chat call's record
    queued_fixed_bytes=1536,  # the span, its attributes, the call's copied arguments
)

SCORES = Endpoint(
    path="/v1/scores/batch",
    body_key=b"scores",
    kind="scores",
    thread_name="promptrail-scores",
    typical_bytes=200,  # an id, a name, a value, a record id: ~150 bytes
    # Its dict, id and name strings, the wrapper (sys.getsizeof): a span's estimate would let
    # a budget hold less than half the scores it can.
    queued_fixed_bytes=768,
    warn_without_key=False,
)
