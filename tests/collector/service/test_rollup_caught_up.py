"""The collector says once, in its log, when its analytics rollup has caught up: until then a
store that was down (or loaded behind its back) has analytics read more of the log."""

from __future__ import annotations

import logging
import time

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.keys import DEFAULT_AUTH

CAUGHT_UP = "rollup: caught up"


def test_the_sealer_says_once_that_it_caught_up(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    quick = settings.model_copy(
        update={"rollup_settle_seconds": 0.0, "rollup_interval_seconds": 0.05}
    )
    caplog.set_level(logging.INFO, logger="promptrail.rollup")
    with TestClient(create_app(quick), headers=DEFAULT_AUTH) as api:
        record = {"prompt_name": "a", "model": "gpt-4o", "input": "hi", "output": "yo"}
        assert api.post("/v1/requests", json=record).status_code in (200, 201, 202)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            said = [r for r in caplog.records if r.getMessage().startswith(CAUGHT_UP)]
            sealed = [r for r in caplog.records if r.getMessage().startswith("rollup: sealed")]
            if said and sealed:
                break
            time.sleep(0.05)
        # Several more rounds of the sealer: it says so only once.
        time.sleep(0.5)
    said = [r for r in caplog.records if r.getMessage().startswith(CAUGHT_UP)]
    assert len(said) == 1
    assert any(r.getMessage().startswith("rollup: sealed") for r in caplog.records)
