"""Records made ready to send: each given its environment, masked, and encoded as JSON.

:class:`RecordEncoder` is the first step of :class:`~promptrail._capture.send.RecordSender`'s
path: what it returns is the bytes the sender keeps and posts. It also keeps the mean size of
what it encoded, which the shipper sizes its queue by.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec

from .stats import CaptureStats

logger = logging.getLogger("promptrail")

Mask = Callable[[dict[str, Any]], dict[str, Any]]

# One compiled encoder call per record (msgspec, a fraction of orjson's per-call cost:
# docs/benchmarks.md): the record's size is then known exactly and a waiting record keeps only
# its bytes, not its Python objects.
_encode_record = msgspec.json.Encoder(enc_hook=str).encode


class RecordEncoder:
    """Give records the sender's environment, mask them, and encode each as JSON.

    ``stats`` counts a record the mask fails on as dropped (``mask_error``), under the
    counters' lock; ``typical_bytes`` is the mean size said until something is encoded.
    """

    def __init__(
        self,
        mask: Mask | None,
        environment: str | None,
        stats: CaptureStats,
        typical_bytes: int,
    ) -> None:
        """Mask with ``mask`` (None: records go as they are); ``environment``: see encode."""
        self._mask = mask
        self._environment = environment
        self._stats = stats
        self._typical_bytes = typical_bytes
        self._encoded_records = self._encoded_bytes = 0

    def encode(self, records: list[dict[str, Any]]) -> list[bytes]:
        """Mask each record and encode it as JSON; a record the mask fails on is dropped.

        Each record gets the sender's environment first (the mask sees it).
        """
        environment = self._environment
        if environment is not None:
            for record in records:
                record.setdefault("environment", environment)
        mask = self._mask
        if mask is None:
            encoded = [_encode_record(record) for record in records]
        else:
            encoded = []
            for record in records:
                masked = self._masked(record, mask)
                if masked is not None:
                    encoded.append(_encode_record(masked))
        self._encoded_records += len(encoded)
        self._encoded_bytes += sum(map(len, encoded))
        return encoded

    @property
    def mean_record_bytes(self) -> int:
        """The mean size of the items encoded so far (a typical item's until there are some)."""
        if not self._encoded_records:
            return self._typical_bytes
        return self._encoded_bytes // self._encoded_records

    def _masked(self, record: dict[str, Any], mask: Mask) -> dict[str, Any] | None:
        try:
            return mask(record)
        except Exception:
            # Never ship a record the mask could not clean.
            with self._stats.lock:
                self._stats.add("in_flight", -1)
                self._stats.drop("mask_error")
            logger.exception("promptrail: mask failed; record dropped")
            return None
