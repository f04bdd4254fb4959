"""The shipper: ended capture spans wait in a bounded queue; one thread turns them into
records and hands them to the sender (``send.py``). Scores take a shipper of their own, to
the scores endpoint (``endpoints.py``): a score is queued as its ready JSON item (:meth:`put`).

The application's thread only appends to a deque (and counts); everything else — building
the record, masking, JSON, gzip, the HTTP post and its retries — happens on the shipper's
thread. This is the part of the SDK's BatchSpanProcessor capture needs, without its per-span
locking and condition signalling (why: src/promptrail/DESIGN.md, "Capture path").
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Protocol

from .sampling_and_fork import Sampler, forget_after_fork, restart_after_fork
from .send import DEFAULT_MAX_PENDING_BYTES, QUICK_SHUTDOWN_SECONDS, RecordSender
from .stats import CaptureStats

logger = logging.getLogger("promptrail")

_BATCH = 512
# A deep queue is shipped in larger batches: fewer posts, so fewer waits for the GIL per
# record while the application keeps it busy (docs/benchmarks.md, "Burst").
_DEEP_BATCH = 4096
# What a queued item holds in memory, estimated from the items shipped so far: a fixed part
# (the endpoint's ``queued_fixed_bytes``) and the item's text as Python objects, about its
# JSON's size again. Rounded up from tracemalloc's figures (docs/benchmarks.md, "Burst"), so
# that the budget bounds more than it counts.
_TEXT_FACTOR = 1.5
# How long a shipper with nothing to do rests before it looks again (the spool's rescan for
# other processes' files: spool.py): it is woken at once by the first item queued.
_REST_SECONDS = 30.0
# A round the shipper has not begun by now is overdue: a full batch waited this many more
# items, or its flush interval passed this long ago. The application's thread then hands it
# the GIL (Shipper._hand_over), waiting at most _HAND_OVER_SECONDS for the round to end.
_OVERDUE_ITEMS = _BATCH + 16
_OVERDUE_SECONDS = 0.005
_HAND_OVER_SECONDS = 0.1
_MAX_BACKOFF = 32  # flush intervals between hand-overs while the shipper makes no progress
_monotonic = time.monotonic


class Shippable(Protocol):
    """What the shipper queues: an ended span (or a score, :class:`QueuedItem`)."""

    @property
    def trace_id(self) -> int: ...  # what sampling decides by

    def to_record(self) -> dict[str, Any]: ...  # the JSON item posted


class QueuedItem:
    """An item queued as its ready JSON (a score), shipped as it is."""

    __slots__ = ("_item",)

    trace_id = 0  # never sampled: only spans are (sample_rate is the share of traces kept)

    def __init__(self, item: dict[str, Any]) -> None:
        self._item = item

    def to_record(self) -> dict[str, Any]:
        """The item's JSON for the endpoint's batch."""
        return self._item


class Shipper:
    """Queue ended spans (or scores) and ship them in the background.

    What waits (items in the queue, items for the collector) is bounded by ``max_bytes``.
    The sender's endpoint says what the items are: the thread's name, the memory estimate
    and the log lines follow it.
    """

    def __init__(
        self,
        exporter: RecordSender,
        stats: CaptureStats,
        *,
        sample_rate: float = 1.0,
        max_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        flush_interval: float = 1.0,
    ) -> None:
        self._endpoint = exporter.endpoint
        self._noun = self._endpoint.kind  # what the log lines call the items this shipper drops
        self._exporter = exporter
        self._stats = stats
        self._sampler = Sampler(sample_rate)
        # At the default rate every trace is kept: on_end skips the sampler's call.
        self._sampling = sample_rate < 1.0
        self._budget = max(1, max_bytes)
        self._bodies = self._shipped = 0
        self._learn_size()
        self._interval = flush_interval
        self._warned = False
        self._start()
        restart_after_fork(self)

    def _start(self) -> None:
        self._queue: deque[Shippable] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._resting = False  # waiting for a first item (on_end wakes it), not for a timer
        # Hand-overs (_hand_over): when a round is due, and how to wait for one to end.
        self._due = _monotonic() + self._interval + _OVERDUE_SECONDS
        self._overdue_items = _OVERDUE_ITEMS
        self._rounds = 0
        self._round_ended = threading.Condition(threading.Lock())
        self._backoff = 1
        self._handing = False
        self._took = False  # whether the last round shipped anything (else: rest)
        self.hand_overs = 0  # how often an application's thread handed over (and waited)
        # Held while spans are turned into records and sent: a flush waits for the batch
        # the worker has taken, so "flushed" means every span ended before it was shipped.
        self._drain_lock = threading.Lock()
        self._worker = threading.Thread(
            target=self._run, name=self._endpoint.thread_name, daemon=True
        )
        self._worker.start()

    def _after_fork(self) -> None:
        # The parent's queue and thread are the parent's: the child starts with its own.
        self._start()

    @property
    def exporter(self) -> RecordSender:
        """The sender of the items (its ``pending`` wait for the collector)."""
        return self._exporter

    @property
    def idle(self) -> bool:
        """Whether every item queued so far is settled (nothing to flush or send at exit)."""
        return not self._queue and not self._exporter.pending

    @property
    def queued(self) -> int:
        """Spans waiting to become records."""
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """The estimated memory of the spans waiting to become records."""
        return len(self._queue) * self._span_bytes

    def on_end(self, span: Shippable) -> None:
        """Take an ended span (runs in the application's thread: keep it cheap)."""
        if self._sampling and not self._sampler.keeps(span.trace_id):
            self._stats.add("sampled_out")
            return
        # Counted as captured when the shipper takes it (or when dropped): no lock here.
        queue = self._queue
        if (len(queue) + 1) * self._span_bytes + self._exporter.pending_bytes > self._budget:
            self._drop_full()
            return
        queue.append(span)
        size = len(queue)
        if (size >= _BATCH or self._resting) and not self._wake.is_set():
            if self._resting:  # its first item waits the flush interval
                self._due = _monotonic() + self._interval + _OVERDUE_SECONDS
            self._wake.set()
            return
        if size >= self._overdue_items or _monotonic() > self._due:
            self._hand_over()

    def _hand_over(self) -> None:
        """Let the shipper's overdue round run now, this thread waiting for it (bounded).

        A thread that needs the GIL back (the shipper, woken by its timer or a full batch)
        waits for the holder to release it; each release wakes it, and CPython 3.11 restarts
        its 5 ms switch interval then. An application thread that keeps the GIL and releases
        it briefly every few milliseconds (a model call over a fast transport does, for its
        request id's random bytes) therefore starves the shipper outright: measured, 12,300
        streamed calls in a loop shipped nothing, while the waiting thread was woken at every
        call's release, a cost of its own to each call (docs/benchmarks.md, "The shipper
        starved of the GIL"). Here the application's thread waits on a lock instead, the GIL
        free, until the round has ended or ``_HAND_OVER_SECONDS`` passed: the shipper's work
        then runs in one stretch, once a flush interval or a batch, as it would have beside
        a thread waiting on the network. A round that does not end in time (a collector slow
        to answer) makes the next hand-over wait twice as many intervals.
        """
        if self._stopping or threading.get_ident() == self._worker.ident:
            return
        self._due = _monotonic() + self._interval * self._backoff
        self._overdue_items = len(self._queue) + _BATCH * self._backoff
        self.hand_overs += 1
        rounds = self._rounds
        self._handing = True  # a round now, not after the flush interval (_run)
        self._wake.set()
        with self._round_ended:
            ended = self._round_ended.wait_for(lambda: self._rounds != rounds, _HAND_OVER_SECONDS)
        self._backoff = 1 if ended else min(2 * self._backoff, _MAX_BACKOFF)

    def put(self, item: dict[str, Any]) -> None:
        """Queue one ready JSON item, a score (the caller's thread: keep it cheap)."""
        self.on_end(QueuedItem(item))

    def _drop_full(self) -> None:
        stats = self._stats
        with stats.lock:
            stats.add("captured")
            stats.drop("queue_full")
        if not self._warned:
            self._warned = True
            logger.warning(
                "promptrail: capture is over its memory budget (%d MiB); dropping new %s "
                "(counted in promptrail.stats()). Raise it with init(max_queue_bytes=...) or "
                "PROMPTRAIL_MAX_QUEUE_BYTES",
                self._budget >> 20,
                self._noun,
            )

    def _run(self) -> None:
        drained = time.monotonic()
        while not self._stopping:
            # A spool backlog is replayed in rounds (at its bounded rate): come back soon, but
            # not while the collector is down (a round would only write one more small file).
            on_disk = self._exporter.replay_backlog
            backlog = on_disk and not self._exporter.unreachable
            # Nothing waiting in memory or on disk (retried each round while the collector is
            # down) and the last round found nothing: rest until an item comes. Right after a
            # round that shipped, the timer instead: a rest's first item would wake the thread
            # at once, to wait for the GIL a whole flush interval (_hand_over).
            if not on_disk and not self._exporter.pending and not self._took:
                self._rest()
                if self._stopping:
                    break
            if self._handing:  # an application's thread is waiting for this round
                woken = True
            else:
                woken = self._wake.wait(min(self._interval, 0.05) if backlog else self._interval)
            self._wake.clear()
            try:
                now = time.monotonic()
                if woken or not backlog or now - drained >= self._interval:
                    drained = now
                    self._drain(everything=False)
                else:
                    # A replay round only: live spans still wait for their flush interval or
                    # a full batch, as they do without a spool.
                    self._exporter.replay()
                    self._exporter.report_recovery()
            except Exception:  # never let the thread die: the next round retries
                logger.exception("promptrail: shipping failed")

    def _rest(self) -> None:
        """With nothing queued, wait for the first item (or ``_REST_SECONDS``), not the flush
        interval's timer: the first item then waits its flush interval as before.

        A thread that wakes needs the GIL back, and while the application's thread releases
        and retakes it often (every model call does, several times), a waiting thread is woken
        at each release and seldom wins it: measured in the black-box harness's process, two
        shipper threads waking each second with nothing to ship spent ~7 ms of CPU a second
        being woken, and each release the application's thread made woke one of them
        (docs/benchmarks.md, "SDK overhead, black-box harness"). The score shipper, idle in
        most applications, now sleeps through.
        """
        self._resting = True  # before the look at the queue: on_end wakes it from here on
        if not self._queue and not self._stopping:
            self._wake.wait(_REST_SECONDS)
        self._resting = False
        self._wake.clear()
        # A full batch that came while the wake was still set (its on_end saw it set) must
        # not wait for the flush interval: wake again for it.
        if len(self._queue) >= _BATCH:
            self._wake.set()

    def _take(self) -> list[Shippable]:
        """Take the next batch off the queue: captured, and in flight until shipped."""
        stats = self._stats
        with stats.lock:
            queue = self._queue
            size = len(queue)
            taken = [queue.popleft() for _ in range(min(size, _DEEP_BATCH))]
            stats.add("captured", len(taken))
            stats.add("in_flight", len(taken))
        return taken

    def _drain(self, *, send: bool = True, everything: bool = True) -> bool:
        """Ship every queued span; False if the collector could not take them all.

        ``send=False`` only turns them into pending records (shutdown's last attempt sends
        them all at once). ``everything=False`` (the worker's round): what is queued when it
        starts, then only full batches. A post takes a while when the application keeps the
        GIL busy (each of its socket steps waits for the GIL again), and spans keep coming
        meanwhile: chasing them to an empty queue made a post of a few dozen records every
        few milliseconds, each with its HTTP and gzip overhead and its GIL hand-offs landing
        in the application's calls (src/promptrail/DESIGN.md, "Shipping beside the calls").
        """
        with self._drain_lock:
            self._handing = False
            self._due = _monotonic() + self._interval + _OVERDUE_SECONDS
            self._overdue_items = _OVERDUE_ITEMS
            took = 0
            ok = True
            first = True
            while first or everything or len(self._queue) >= _BATCH:
                first = False
                batch = self._take()
                if not batch:
                    break
                took += len(batch)
                ok = self._exporter.ship([span.to_record() for span in batch], send=send) and ok
                # A streamed call queued with its body's bytes (read when its record is
                # built, just above) holds them until then: their mean over every item shipped
                # so far is learned beside the records' (the encoder's mean, the same way).
                self._bodies += sum(getattr(span, "body_bytes", 0) for span in batch)
                self._shipped += len(batch)
                self._learn_size()
            if send:
                self._exporter.replay()
            self._exporter.report_recovery()
            self._took = took > 0
            # Due an interval after this round ends, when the timer starts: counted from its
            # start, a round as long as a post to a distant collector would make the next
            # one look late and hand over for nothing.
            self._due = _monotonic() + self._interval + _OVERDUE_SECONDS
        with self._round_ended:
            self._rounds += 1
            self._round_ended.notify_all()
        return ok

    def _learn_size(self) -> None:
        mean = self._exporter.mean_record_bytes
        bodies = self._bodies // self._shipped if self._shipped else 0
        self._span_bytes = self._endpoint.queued_fixed_bytes + int(_TEXT_FACTOR * mean) + bodies

    def flush(self, timeout: float) -> bool:
        """Ship what is queued and everything pending; False if ``timeout`` ran out first."""
        drained = self._drain()
        return self._exporter.force_flush(int(timeout * 1000)) and drained

    def shutdown(self, timeout: float) -> None:
        """Stop the thread, ship what is left within ``timeout``, count what could not go.

        The whole shutdown takes ``timeout`` at most (``QUICK_SHUTDOWN_SECONDS`` when the last
        post found the collector unreachable); one line reports what was not delivered.
        """
        forget_after_fork(self)
        exporter = self._exporter
        exporter.stop_retrying()
        if exporter.unreachable:
            timeout = min(timeout, QUICK_SHUTDOWN_SECONDS)
        deadline = time.monotonic() + timeout
        self._stopping = True
        self._wake.set()
        self._worker.join(timeout)

        def finish() -> None:
            self._drain(send=False)
            exporter.final_send(deadline - time.monotonic())

        closer = threading.Thread(target=finish, name="promptrail-shutdown", daemon=True)
        closer.start()
        # A little past the deadline: the last post's own timeout ends at it.
        closer.join(max(0.0, deadline - time.monotonic()) + 0.2)
        with self._stats.lock:
            left = len(self._queue)
            self._queue.clear()
            self._stats.add("captured", left)
            exporter.close(waited=timeout, unsent=left)
