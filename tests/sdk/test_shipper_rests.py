"""A shipper with nothing to ship rests until an item comes (issue 52, point 3).

A thread that wakes needs the GIL back, and while the application's thread releases and
retakes it often (a model call does, several times), a waiting thread is woken at each release
and seldom wins it: two shipper threads waking every second with nothing to do cost the calls
beside them (src/promptrail/_capture/shipping.py, ``Shipper._rest``). An idle shipper (the score
shipper in most applications) now waits for its first item instead of a timer, and that item
still goes out after its flush interval without a flush; a shutdown still stops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from promptrail._capture.send import RecordSender
from promptrail._capture.shipping import Shipper
from promptrail._capture.stats import CaptureStats
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

MakeShipper = Callable[[float], tuple[Shipper, CaptureStats]]


@pytest.fixture
def shipper_to(live_url: str) -> Iterator[MakeShipper]:
    """Shippers posting to a live collector, each shut down at the end of the test."""
    made: list[Shipper] = []

    def make(flush_interval: float) -> tuple[Shipper, CaptureStats]:
        stats = CaptureStats()
        shipper = Shipper(
            RecordSender(DEFAULT_KEY, live_url, stats=stats), stats, flush_interval=flush_interval
        )
        made.append(shipper)
        return shipper, stats

    yield make
    for shipper in made:
        shipper.shutdown(5)


def _record(name: str) -> dict[str, str]:
    return {"id": f"req_rest-{name}", "model": "gpt-4o-mini"}


def _stored(live_url: str, name: str) -> bool:
    answer = httpx.get(f"{live_url}/v1/requests/req_rest-{name}", headers=DEFAULT_AUTH)
    return answer.status_code == 200


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _until_resting(shipper: Shipper) -> None:
    _until(lambda: shipper._resting, "the idle shipper never came to rest")


def test_an_idle_shipper_rests_and_its_first_item_goes_out_without_a_flush(
    shipper_to: MakeShipper, live_url: str
) -> None:
    shipper, stats = shipper_to(0.05)
    _until_resting(shipper)
    shipper.put(_record("first"))
    # No flush: the item woke the shipper, which shipped it.
    _until(lambda: stats.snapshot().get("exported", 0) == 1, "the first item was not shipped")
    assert _stored(live_url, "first")
    _until_resting(shipper)  # nothing left: at rest again
    shipper.put(_record("second"))
    shipper.put(_record("third"))
    _until(lambda: stats.snapshot().get("exported", 0) == 3, "the next items were not shipped")
    assert _stored(live_url, "second") and _stored(live_url, "third")


def test_a_resting_shipper_stops_at_shutdown_and_ships_what_came_last(
    shipper_to: MakeShipper, live_url: str
) -> None:
    # A flush interval far longer than the test: only the shutdown ships the item.
    shipper, stats = shipper_to(3600)
    _until_resting(shipper)
    shipper.put(_record("last"))
    shipper.shutdown(5)
    assert not shipper._worker.is_alive()
    assert stats.snapshot()["exported"] == 1
    assert _stored(live_url, "last")
