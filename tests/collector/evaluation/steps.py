"""Steps the online-evaluation tests take over HTTP, and a collector process killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from promptrail.collector.runtime_file import read_runtime


def put_evaluator(api: TestClient, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """PUT an evaluator; check the 200; return its ``data``."""
    response = api.put(f"/v1/evaluators/{name}", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def create_rule(api: TestClient, **fields: Any) -> dict[str, Any]:
    """POST a rule (judging records with ``exact`` unless told); check the 201; return it."""
    body = {"name": "exact on answers", "evaluator": "exact", "target": "record", **fields}
    response = api.post("/v1/evaluation-rules", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def killed(api: httpx.Client, data_dir: Path) -> None:
    """Kill -9 the collector serving ``data_dir`` and wait until ``api`` no longer answers."""
    info = read_runtime(data_dir)
    assert info is not None
    os.kill(info.pid, signal.SIGKILL)  # no shutdown: as a crash or a power cut
    deadline = time.monotonic() + 30
    while True:
        try:
            api.get("/health")
        except httpx.TransportError:
            return
        assert time.monotonic() < deadline
        time.sleep(0.05)


def decision_rows(data_dir: Path, final: bool = False) -> dict[str, int]:
    """How many decision rows were ever written per target (``final``: other than
    ``waiting``), from the time-ordered copy, which keeps every row, read by another process
    once the collector stopped."""
    where = " WHERE decision != \\'waiting\\'" if final else ""
    script = (
        "import json, clickhouse_connect; "
        f"c = clickhouse_connect.get_client(dsn='chdb://{data_dir / 'clickhouse'}'); "
        "rows = c.query('SELECT target_id, count() FROM promptrail.evaluation_decision_times"
        f"{where} GROUP BY target_id').result_rows; "
        "print(json.dumps({str(r[0]): int(r[1]) for r in rows}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    counts: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts
