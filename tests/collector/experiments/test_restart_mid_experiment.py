"""A collector stopped mid-experiment (docs/api-notes.md, "Datasets and experiments"; issue 33 point
2): real ``promptrail serve`` processes on one data directory, the OpenAI wire stub on a real
socket.

Decided behaviour (collector/services/experiments/DESIGN.md): the experiment is marked ``failed``,
on the way down when the collector stops cleanly and at the next start when it was killed;
the results it stored stay, counted exactly, and nothing more runs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from promptrail.collector.runtime_file import read_runtime
from promptrail.testing import OpenAIStub
from tests.collector.processes import collector
from tests.keys import OPENAI_KEY

ITEMS = 40


def stub_env(stub: OpenAIStub) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{stub.url}/v1", "OPENAI_API_KEY": OPENAI_KEY}


def start_slow_experiment(api: httpx.Client, stub: OpenAIStub) -> str:
    """A 40-item experiment at concurrency 1 whose runs take 0.3 s; return its id once at
    least two results are stored."""
    stub.script.first_byte_delay = 0.3
    for path, body in (
        ("/v1/prompts", {"name": "p", "template": "Say {x}", "model": "gpt-4o-mini"}),
        ("/v1/datasets", {"name": "d"}),
        (
            "/v1/datasets/d/items",
            {"items": [{"id": f"i{n:02d}", "input_variables": {"x": n}} for n in range(ITEMS)]},
        ),
    ):
        assert api.post(path, json=body).status_code == 201
    made = api.post(
        "/v1/experiments",
        json={"dataset": "d", "prompt": "p", "concurrency": 1,
              "evaluators": [{"type": "contains"}, {"type": "json_valid"}]},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    experiment_id: str = made.json()["data"]["id"]
    deadline = time.monotonic() + 60
    while api.get(f"/v1/experiments/{experiment_id}").json()["data"]["counts"]["done"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return experiment_id


def assert_failed_and_whole(api: httpx.Client, experiment_id: str) -> dict[str, Any]:
    data: dict[str, Any] = api.get(f"/v1/experiments/{experiment_id}").json()["data"]
    assert data["status"] == "failed", data
    assert "stopped" in data["error"]
    assert data["completed_at"]
    results = api.get(f"/v1/experiments/{experiment_id}/results", params={"limit": 100})
    rows = results.json()["data"]
    # Counted exactly: the summary and counts are the stored results, each whole.
    assert 2 <= data["counts"]["done"] == len(rows) < ITEMS
    assert all(r["status"] == "success" and r["request_id"] for r in rows)
    assert data["summary"]["scores"]["json_valid"]["count"] == len(rows)
    return data


def test_a_killed_collector_s_experiment_is_marked_failed_at_the_next_start(
    tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    log: list[str] = []
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        experiment_id = start_slow_experiment(api, openai_stub)
        info = read_runtime(tmp_path)
        assert info is not None
        os.kill(info.pid, signal.SIGKILL)  # no shutdown: as a crash or a power cut
        deadline = time.monotonic() + 30
        while True:
            try:
                api.get("/health")
            except httpx.TransportError:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
    calls = len(openai_stub.calls)
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        first = assert_failed_and_whole(api, experiment_id)
        time.sleep(1)
        assert api.get(f"/v1/experiments/{experiment_id}").json()["data"] == first
    # Nothing was resumed.
    assert len(openai_stub.calls) == calls


def test_a_collector_stopped_cleanly_marks_its_experiment_failed_on_the_way_down(
    tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    log: list[str] = []
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        experiment_id = start_slow_experiment(api, openai_stub)
    assert log[-1] == "exit=0", log
    calls = len(openai_stub.calls)
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        assert_failed_and_whole(api, experiment_id)
    assert len(openai_stub.calls) == calls
