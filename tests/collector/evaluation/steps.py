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


def log_batch(api: TestClient, records: list[dict[str, Any]]) -> None:
    """Log ``records`` through the batch route; check that none was rejected."""
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["rejected"] == [], response.text


def decisions_by_target(api: TestClient, rule_id: str) -> dict[str, dict[str, Any]]:
    """A rule's decisions (its first 100), by target id."""
    page = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params={"limit": 100}).json()
    return {d["target_id"]: d for d in page["data"]}


def until_decided(
    api: TestClient, rule_id: str, target: str, decision: str
) -> dict[str, dict[str, Any]]:
    """Poll (at most 60 s) until ``target``'s decision is ``decision``; all the decisions."""
    deadline = time.monotonic() + 60
    while True:
        found = decisions_by_target(api, rule_id)
        if target in found and found[target]["decision"] == decision:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


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
