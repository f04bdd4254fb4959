"""The write path: every row reaches the store through this package.

A service calls one write and gets back :class:`Stored` or a :class:`Refused` naming why (the
store is slower than rows arrive, or its writes fail); it answers a refusal with its 503 and
``Retry-After`` and knows nothing of buffers, journals or retries. How a table group is
written is declared once, in :mod:`.plan`, and these modules do it:

- **Group commit** (:mod:`.group_commit`, behind :class:`RowWriter`): the request log on the
  embedded store. Each ClickHouse insert writes a part, so one insert per HTTP request would
  cap ingest at a few hundred requests per second; callers' encoded rows gather in a bounded
  buffer, one thread inserts everything pending as one block, and each caller is answered
  once its rows are stored. Bounded (``Settings.ingest_buffer_bytes``): a caller finding no
  room within its wait is refused (busy), and after a failed insert callers are refused at
  once until a probe (an insert of no rows) succeeds. On a ClickHouse server the same
  :class:`RowWriter` makes an asynchronous insert instead: the server's own group commit.
  Ids are the caller's (or made before the write), so a retry of a refused batch is
  collapsed by the table; records a batch rejects never reach the writer, and are reported
  by index by the ingest service.
- **Journal** (the registry's, beside the prompt store): a registry write on the embedded
  store is kept by an append to a file and applied to chDB right behind; a kill -9 loses
  nothing acknowledged, reads wait for what was journaled before them, and at most a bounded
  number of entries wait (then a write waits, and is refused as an outage).
- **Write-behind** (:mod:`.behind`): a run's record. The run answers once its provider's
  answer is priced; a worker pool then writes the record through the request log's
  :class:`RowWriter`, retrying a refusal at the store's ``retry_after``; every read of the
  log first waits for the project's records still being written.
- **Direct**: scores, experiments, datasets, keys and the collector's upkeep insert one
  statement per call (few rows, read back at once, or written under a lock of their store).
"""

from __future__ import annotations

from .behind import PendingWrites
from .outcomes import STORED, Refused, Stored, WriteOutcome
from .plan import WRITE_PLAN, TableGroup, WriteMode
from .rows import GroupCommitLimits, RowTable, RowWriter

__all__ = [
    "STORED",
    "WRITE_PLAN",
    "GroupCommitLimits",
    "PendingWrites",
    "Refused",
    "RowTable",
    "RowWriter",
    "Stored",
    "TableGroup",
    "WriteMode",
    "WriteOutcome",
]
