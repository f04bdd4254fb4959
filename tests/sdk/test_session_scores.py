"""``promptrail.score(..., session_id=...)`` against a live collector: a score on a whole
conversation goes to the session even inside a trace, and a score the collector would refuse
for its target (a session beside another target, an empty session id) is dropped before it
is queued, never raised.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import promptrail
from promptrail import _runtime
from tests.keys import DEFAULT_KEY
from tests.sdk.score_steps import drops_and_refusals, stored_scores

pytestmark = pytest.mark.usefixtures("memory_only")


@pytest.fixture
def capture() -> Iterator[None]:
    """Fresh counters; the SDK shut down afterwards."""
    promptrail.shutdown()
    _runtime.reset_stats()
    yield
    promptrail.shutdown()


def test_a_session_score_reaches_the_session_even_inside_a_trace(
    live_url: str, capture: None
) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)

    @promptrail.observe
    def conversation_ended() -> str | None:
        promptrail.score("resolved", True, session_id="chat-sdk-1", comment="user said thanks")
        return promptrail.current_trace_id()

    trace = conversation_ended()
    assert trace is not None
    assert promptrail.flush(timeout=10)
    (stored,) = stored_scores(live_url, session_id="chat-sdk-1")
    assert (stored["session_id"], stored["request_id"], stored["trace_id"]) == (
        "chat-sdk-1",
        None,
        None,
    )
    assert (stored["value"], stored["source"], stored["comment"]) == (
        True,
        "sdk",
        "user said thanks",
    )
    assert stored_scores(live_url, trace_id=trace) == []


EDGES: list[dict[str, Any]] = [
    {"name": "n", "value": 1, "session_id": "s-ok"},
    {"name": "n", "value": 1, "session_id": "s", "request_id": "req_x"},
    {"name": "n", "value": 1, "session_id": "s", "trace_id": "a" * 32},
    {"name": "n", "value": 1, "session_id": ""},
    {"name": "n", "value": 1, "session_id": "s" * 1000},
    {"name": "n", "value": 1, "session_id": "s" * 1001},
]


def test_the_sdk_drops_exactly_the_session_scores_the_collector_refuses(
    live_url: str, capture: None
) -> None:
    dropped_by_sdk, refused = drops_and_refusals(live_url, EDGES, "sess-edge")

    assert refused == {1, 2, 3, 5}
    assert dropped_by_sdk == [n in refused for n in range(len(EDGES))]
    assert promptrail.stats()["scores"]["exported"] == len(EDGES) - len(refused)
