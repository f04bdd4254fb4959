"""A refused write's answer: the same 503 for every service writing through the store.

The store answers each write :class:`Stored` or :class:`Refused` (see
:mod:`collector.store.writes`); a service hands that answer here, which raises the 503
(``STORE_UNAVAILABLE``, or ``STORE_BUSY`` when the store is only slower than what arrives)
with ``Retry-After`` set to the collector's ``store_retry_after_seconds``.
"""

from __future__ import annotations

import logging

from ..store.writes import Refused, WriteOutcome
from .ingest import refused_error

logger = logging.getLogger("promptrail.store")


def raise_if_refused(outcome: WriteOutcome, retry_after: int, what: str) -> None:
    """Return when ``outcome`` is stored; else log that ``what`` was not stored and raise
    the refusal's 503, asking the client to come back in ``retry_after`` seconds."""
    if isinstance(outcome, Refused):
        logger.warning("%s not stored: %s", what, outcome.message)
        raise refused_error(outcome, retry_after)
