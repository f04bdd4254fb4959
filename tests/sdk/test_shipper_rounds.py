"""The shipper's background round posts full batches: it does not chase the spans that arrive
while it posts (each chase was a post of a few dozen records, whose fixed cost and GIL
hand-offs landed in the application's calls; src/promptrail/DESIGN.md, "Shipping beside the
calls"). A flush still sends everything."""

from __future__ import annotations

import gzip
import json
import threading

import httpx

from promptrail._capture.send import RecordSender
from promptrail._capture.shipping import Shipper
from promptrail._capture.stats import CaptureStats


def test_a_round_leaves_what_arrived_during_its_post_for_the_next_round() -> None:
    posts: list[int] = []
    posting = threading.Event()
    shipper: Shipper | None = None

    def collector(request: httpx.Request) -> httpx.Response:
        records = json.loads(gzip.decompress(request.content))["records"]
        posts.append(len(records))
        if len(posts) == 1:
            assert shipper is not None
            # The application keeps capturing while the first post is under way.
            for i in range(100):
                shipper.put({"id": f"late-{i}"})
            posting.set()
        return httpx.Response(201, json={"data": {"accepted": len(records), "rejected": []}})

    stats = CaptureStats()
    sender = RecordSender(
        "k", "http://collector.test", stats=stats, transport=httpx.MockTransport(collector)
    )
    # No timed round during the test: only a full batch (512 queued) wakes the worker.
    shipper = Shipper(sender, stats, flush_interval=3600)
    try:
        for i in range(512):
            shipper.put({"id": f"early-{i}"})
        assert posting.wait(30)
        # The worker holds this lock for its whole round: once it is free, the round is over.
        with shipper._drain_lock:
            assert posts == [512]
            assert shipper.queued == 100

        assert shipper.flush(timeout=30)
        assert posts == [512, 100]
        assert stats.snapshot()["exported"] == 612
    finally:
        shipper.shutdown(5)
