"""At most 8 cells of a run are at the provider at once, however many the run has."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.collector.playground.steps import CountingApp, play


def test_no_more_than_eight_cells_are_called_at_once(
    counted_api: TestClient, counting: CountingApp
) -> None:
    data = play(
        counted_api,
        prompt={"template": "Hello.", "model": "gpt-4o-mini"},
        models=["gpt-4o-mini", "gpt-4o"],
        repetitions=10,
    )
    assert len(data["cells"]) == 20
    assert all(c["status"] == "success" for c in data["cells"])
    assert counting.served == 20
    # Each request waits at the stub for 8 in flight: the service sends exactly that many.
    assert counting.most == 8
