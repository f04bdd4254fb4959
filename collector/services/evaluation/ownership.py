"""Which collector's worker judges a rule, when several collectors share one ClickHouse server
(docs/architecture.md, "Several collectors on one server"): each rule is owned by one live
collector, so a target is judged (and its judge paid) once, not once per collector.

Every collector announces itself with a heartbeat row (:mod:`...store.collector_heartbeats`)
every :data:`BEAT_SECONDS`, and reads back the live ones (a beat in the last
:data:`DEAD_AFTER_SECONDS`, no leaving row). A rule's owner is chosen among them by
rendezvous hashing (the collector with the highest hash of ``(rule id, collector id)``): each
collector computes it alone and they agree, and a collector joining or leaving moves only the
rules it wins or held. The others skip the rule; when it moves, its new owner resumes from the
rule's watermarks in the store (the worker forgets what it kept in memory of a rule it does not
own).

The handover is where a target may still be judged twice, and it is bounded:

- A collector starts judging only once **established**: its first beat is
  :data:`JOIN_GRACE_SECONDS` old. The owners before it see its beat within a beat or two and
  give up the rules it wins at once (before it takes them). A batch of such a rule that an
  old owner had begun before seeing the newcomer, and that is still being judged when the
  grace ends, is judged by both: at most one batch of each moved rule (the worker's batch
  size), and only when that batch took longer than the grace less a beat.
- A collector that cannot write or read its heartbeats for :data:`LEASE_SECONDS` owns nothing
  (the others count it dead at :data:`DEAD_AFTER_SECONDS`), so a stalled collector stops
  starting batches before its rules move; one still deciding a batch then may double it.
- A collector stopped cleanly writes a leaving row: its rules move at once.
- A collector that dies (kill -9) calls nothing more; its rules wait
  :data:`DEAD_AFTER_SECONDS` for their new owner, nothing is lost (the watermarks).

Decisions and scores never double whatever happens (one per rule and target, by key); only
judge calls, and their cost, can.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Callable

import anyio

from ...store.collector_heartbeats import HeartbeatStore, LiveCollector

__all__ = [
    "BEAT_SECONDS",
    "DEAD_AFTER_SECONDS",
    "JOIN_GRACE_SECONDS",
    "LEASE_SECONDS",
    "Ownership",
    "rendezvous_owner",
]

logger = logging.getLogger("promptrail.evaluation")

BEAT_SECONDS = 5.0
DEAD_AFTER_SECONDS = 30.0
JOIN_GRACE_SECONDS = 15.0
LEASE_SECONDS = 15.0


def _weight(rule_id: str, collector_id: str) -> int:
    digest = hashlib.sha256(f"{rule_id}\x00{collector_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def rendezvous_owner(rule_id: str, collector_ids: list[str]) -> str | None:
    """The collector of ``collector_ids`` that owns ``rule_id`` (None: no collector)."""
    if not collector_ids:
        return None
    return max(collector_ids, key=lambda c: (_weight(rule_id, c), c))


class Ownership:
    """This collector's share of the rules, from the heartbeats of the collectors alive."""

    def __init__(
        self,
        beats: HeartbeatStore,
        collector_id: str | None = None,
        *,
        beat_seconds: float = BEAT_SECONDS,
        dead_after_seconds: float = DEAD_AFTER_SECONDS,
        join_grace_seconds: float = JOIN_GRACE_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``collector_id``: this collector's, new for each start unless given."""
        self.collector_id = collector_id or f"col_{uuid.uuid4().hex[:16]}"
        self._beats = beats
        self._every = beat_seconds
        self._dead_after_ms = int(dead_after_seconds * 1000)
        self._grace_ms = int(join_grace_seconds * 1000)
        self._lease = lease_seconds
        self._clock = clock
        self._live: list[LiveCollector] = []
        self._refreshed: float | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start beating, on the running event loop."""
        if self._task is None:
            logger.info("evaluation worker %s shares the rules by heartbeat", self.collector_id)
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, leave: bool = True) -> None:
        """Stop beating; ``leave``: say so, for the others to take this collector's rules
        at once (not after :data:`DEAD_AFTER_SECONDS`)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._refreshed = None
        if leave:
            try:
                await anyio.to_thread.run_sync(self._beats.beat, self.collector_id, True)
            except Exception:
                logger.exception("evaluation worker %s could not say it leaves", self.collector_id)

    async def _run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self._every)

    async def refresh(self) -> None:
        """Beat, then read the live collectors (a failure keeps the last reading, which
        expires after :data:`LEASE_SECONDS`)."""
        try:
            await anyio.to_thread.run_sync(self._beats.beat, self.collector_id)
            self._live = await anyio.to_thread.run_sync(
                self._beats.live, self._dead_after_ms, self._grace_ms
            )
            self._refreshed = self._clock()
        except Exception:
            logger.exception("evaluation worker %s: heartbeat failed", self.collector_id)

    # -- the rules --------------------------------------------------------------------------

    def owns(self, rule_id: str) -> bool:
        """Whether this collector judges ``rule_id`` now: it is established, its heartbeats
        are fresh, and it wins the rule among the live collectors (established or not: a
        newcomer's rules are left to it before it takes them)."""
        if self._refreshed is None or self._clock() - self._refreshed > self._lease:
            return False
        me = next((c for c in self._live if c.collector_id == self.collector_id), None)
        if me is None or not me.established:
            return False
        owner = rendezvous_owner(rule_id, [c.collector_id for c in self._live])
        return owner == self.collector_id
