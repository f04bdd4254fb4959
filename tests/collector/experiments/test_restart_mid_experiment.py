"""A collector stopped mid-experiment (docs/api-notes.md, "Datasets and experiments"; issue 33 point
2): real ``promptrail serve`` processes on one data directory, the OpenAI wire stub on a real
socket.

Decided behaviour (collector/services/experiments/DESIGN.md): the experiment is marked ``failed``,
on the way down when the collector stops cleanly and at the next start when it was killed;
the results it stored stay, counted exactly, and nothing more runs.
"""

from __future__ import annotations

import json
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
# How long each run's provider call takes: long enough that a stop right after the second
# result finds the experiment mid-way (its 40 items take 4 s), short enough that a run resumed
# by mistake shows within the wait for one below (at 0.3 s the two experiments took 1.2 s to
# start and that wait 1 s).
RUN_SECONDS = 0.1


def stub_env(stub: OpenAIStub) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{stub.url}/v1", "OPENAI_API_KEY": OPENAI_KEY}


def start_slow_experiment(api: httpx.Client, stub: OpenAIStub, tag: str) -> str:
    """A 40-item experiment at concurrency 1 whose runs take ``RUN_SECONDS``, on a prompt and
    dataset of its own named ``tag`` (its calls say "Say <tag>-..."); return its id once at
    least two results are stored."""
    stub.script.first_byte_delay = RUN_SECONDS
    for path, body in (
        ("/v1/prompts", {"name": tag, "template": "Say {x}", "model": "gpt-4o-mini"}),
        ("/v1/datasets", {"name": tag}),
        (
            f"/v1/datasets/{tag}/items",
            {"items": [{"id": f"i{n:02d}", "input_variables": {"x": f"{tag}-{n:02d}"}}
                       for n in range(ITEMS)]},
        ),
    ):  # fmt: skip
        assert api.post(path, json=body).status_code == 201
    made = api.post(
        "/v1/experiments",
        json={"dataset": tag, "prompt": tag, "concurrency": 1,
              "evaluators": [{"type": "contains"}, {"type": "json_valid"}]},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    experiment_id: str = made.json()["data"]["id"]
    deadline = time.monotonic() + 60
    while api.get(f"/v1/experiments/{experiment_id}").json()["data"]["counts"]["done"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return experiment_id


def calls_of(stub: OpenAIStub, tag: str) -> int:
    """How many provider calls the experiment ``tag`` made."""
    return sum(f"Say {tag}-" in json.dumps(call.body) for call in stub.calls)


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


def test_an_experiment_is_marked_failed_on_a_clean_stop_and_at_the_start_after_a_kill(
    tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    # Both stops on one data dir: the clean stop's restart is the killed run's start (three
    # collector starts where a data dir per stop took four).
    log: list[str] = []
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        stopped = start_slow_experiment(api, openai_stub, "stopped")
    # A clean stop marks it failed on the way down.
    assert log[-1] == "exit=0", log
    stopped_calls = calls_of(openai_stub, "stopped")
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        stopped_data = assert_failed_and_whole(api, stopped)
        killed = start_slow_experiment(api, openai_stub, "killed")
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
    killed_calls = calls_of(openai_stub, "killed")
    # The killed one is marked failed at the next start.
    with collector(tmp_path, log, stub_env(openai_stub)) as api:
        first = assert_failed_and_whole(api, killed)
        time.sleep(5 * RUN_SECONDS)  # five runs' time: a resumed run would have shown
        assert api.get(f"/v1/experiments/{killed}").json()["data"] == first
        assert api.get(f"/v1/experiments/{stopped}").json()["data"] == stopped_data
    # Nothing was resumed, by either start.
    assert calls_of(openai_stub, "killed") == killed_calls
    assert calls_of(openai_stub, "stopped") == stopped_calls > 0
