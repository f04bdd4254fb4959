"""Direct writes: one insert per call, the caller waits for it (:data:`.plan.WriteMode.DIRECT`).

The stores written so (scores, experiments, datasets, keys) answer each write as the request
log's :class:`.rows.RowWriter` does: :data:`.outcomes.STORED`, or a :class:`.outcomes.Refused`
when the store cannot take it now, for the service to answer with its 503.
"""

from __future__ import annotations

from collections.abc import Callable

from ..connection import error_summary, is_store_outage
from .outcomes import STORED, Refused, WriteOutcome


def direct_write(write: Callable[[], object]) -> WriteOutcome:
    """Run a direct write: :data:`STORED`, or :class:`Refused` on a store outage
    (:func:`..connection.is_store_outage`: out of reach, overloaded, too many parts); a
    failure that is no outage (a bug: a statement the store refuses) is raised."""
    try:
        write()
    except Exception as exc:
        if not is_store_outage(exc):
            raise
        # The message a store outage has always answered with (api/errors.py).
        return Refused(busy=False, message=f"The store is unavailable: {error_summary(exc)}")
    return STORED
