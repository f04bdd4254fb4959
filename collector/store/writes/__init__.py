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
  by index by the ingest service. By default (``PROMPTRAIL_REQUEST_JOURNAL``) the embedded
  store's group commit is the log's journal (:mod:`.log_journal`): a caller's rows are
  answered once appended to a file, a thread inserts every chunk waiting in one block right
  behind, every read of the log first waits for what was answered before it, and the next
  open stores what a killed process left; bounded in bytes and refusing as the buffer does.
- **Leader commit and journal** (:class:`.group_commit.LeaderCommit`, :mod:`.journal`): the
  registry on the embedded store. Its rows follow a decision taken in memory under the
  registry's lock (a version number, a name's claim: ``store/prompts/group_commit.py``), so
  the first writer finding no commit under way stores every queued writer's rows in one
  call, one ``INSERT .. VALUES`` per table. That call is an append to the journal file
  (~20 us against a ~5 ms chDB part), applied to chDB right behind: a kill -9 loses nothing
  acknowledged (the next open applies the file, deduplication tokens store each entry once),
  every read of the registry's tables waits for what was journaled before it, and at most
  512 entries wait (then an append waits, and fails as a store outage: 503). On a ClickHouse
  server every registry write is a direct insert, a compare-and-set by deduplication token.
- **Write-behind** (:mod:`.behind`): a run's record. The run answers once its provider's
  answer is priced; a worker pool then writes the record through the request log's
  :class:`RowWriter`, retrying a refusal at the store's ``retry_after``; every read of the
  log first waits for the project's records still being written.
- **Direct** (:func:`.direct.direct_write`): scores, experiments, datasets, keys and the
  collector's upkeep insert one statement per call (few rows, read back at once, or written
  under a lock of their store). The first four answer each write :data:`STORED` or
  :class:`Refused` (a store outage) as a :class:`RowWriter` does; a bug is raised.
"""

from __future__ import annotations

from .behind import PendingWrites
from .direct import direct_write
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
    "direct_write",
]
