"""``promptrail backup`` and ``promptrail restore``: a round trip loses nothing.

Real processes on real data dirs: a collector is filled through the API, backed up (through
the running collector, or with it stopped), restored into a new data dir after the old one is
gone, and a collector started there answers every read exactly as the first one did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from promptrail.collector.runtime_file import RuntimeInfo, write_runtime
from promptrail.testing import free_port
from tests.collector.processes import KEY, cli, collector, held_store

# The sealer may sum an hour at once and looks every 50 ms: the backup holds a sealed rollup.
QUICK_ROLLUP = {
    "PROMPTRAIL_ROLLUP_SETTLE_SECONDS": "0",
    "PROMPTRAIL_ROLLUP_INTERVAL_SECONDS": "0.05",
}

RECORDS = [
    {
        "id": f"req_b{i}",
        "prompt_name": "greet" if i % 3 else "summarise",
        "version": 1 + i % 2,
        "model": "gpt-4o" if i % 2 else "claude-sonnet-4",
        "provider": "openai" if i % 2 else "anthropic",
        "status": "error" if i % 5 == 0 else "success",
        "error": "boom" if i % 5 == 0 else None,
        "input_variables": {"name": f"user {i}"},
        "output": f"hello zebra {i}" if i % 4 == 0 else f"hello {i}",
        "metadata": {"team": "a" if i % 2 else "b", "run": str(i)},
        "usage": {"prompt_tokens": 10 + i, "completion_tokens": i, "estimated_cost_usd": i / 100},
        "latency_ms": 100 + 7 * i,
        "created_at": f"2026-04-0{1 + i % 3}T{8 + i % 5:02d}:15:00Z",
    }
    for i in range(24)
]
ANALYTICS = [
    {"metric": metric, "group_by": group_by}
    for metric in ("cost", "usage", "latency", "errors")
    for group_by in ("prompt_name", "model", "day", "hour", "metadata.team")
]
PERIOD = {"start_date": "2026-04-01", "end_date": "2026-04-03"}

# Row count and a checksum of every row, per table of the store at argv[1] (own process: chDB
# opens one data dir per process, and this test's holds the session's store). Rows as reads see
# them (``final``): a merge after the restore may fold a replaced row away, as it would have in
# the source.
DIGEST = """
import json, sys
from promptrail.collector.store.connection import open_client
client = open_client("chdb://" + sys.argv[1])
tables = client.query(
    "SELECT name FROM system.tables WHERE database = 'promptrail' AND engine NOT LIKE '%View'"
).result_rows
print(json.dumps({
    name: list(client.query(
        f"SELECT count(), sum(cityHash64(*)) FROM promptrail.`{name}` SETTINGS final = 1"
    ).result_rows[0])
    for (name,) in tables
}))
"""


def fill(api: httpx.Client, data_dir: Path) -> tuple[str, str, str]:
    """Write prompts, versions, labels, records and an export; make a key and revoke another.

    Return the new key, the revoked one and the export's id.
    """
    team_key, revoked = (new_key(data_dir, "team") for _ in range(2))
    dropped = cli("keys", "revoke", revoked, "--data-dir", str(data_dir))
    assert dropped.returncode == 0, dropped.stderr
    for headers in ({}, {"X-API-Key": team_key}):
        for name in ("greet", "summarise", "gone"):
            body = {"name": name, "template": f"{name} {{{{name}}}}", "model": "gpt-4o"}
            assert api.post("/v1/prompts", json=body, headers=headers).status_code == 201
        api.patch("/v1/prompts/greet", json={"template": "hi {{name}}"}, headers=headers)
        api.patch("/v1/prompts/greet", json={"template": "hey {{name}}"}, headers=headers)
        api.put("/v1/prompts/greet/labels/production", json={"version": 2}, headers=headers)
        api.put("/v1/prompts/greet/labels/staging", json={"version": 3}, headers=headers)
        api.delete("/v1/prompts/gone", headers=headers)
        logged = api.post("/v1/requests/batch", json={"records": RECORDS}, headers=headers)
        assert logged.json()["data"]["accepted"] == len(RECORDS), logged.text
    export = api.post(
        "/v1/requests/export",
        json={"format": "json", "filters": {"metadata": {"team": "a"}}},
        headers={"X-API-Key": team_key},
    ).json()["data"]["export_id"]
    while True:
        status = api.get(f"/v1/requests/exports/{export}", headers={"X-API-Key": team_key})
        if status.json()["data"]["status"] != "processing":
            break
        time.sleep(0.05)
    return team_key, revoked, export


def new_key(data_dir: Path, project: str) -> str:
    """Make a key with ``promptrail keys create`` (through the collector running there)."""
    made = cli("keys", "create", "--project", project, "--data-dir", str(data_dir))
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def reads(api: httpx.Client, team_key: str, revoked: str, export: str) -> dict[str, Any]:
    """Every read a user makes, per project, with the collector's address taken out."""
    refused = api.get("/v1/prompts", headers={"X-API-Key": revoked})
    seen: dict[str, Any] = {"revoked": refused.status_code}
    for project, key in (("default", KEY), ("team", team_key)):
        paths = ["/v1/prompts?limit=100", "/v1/prompts/gone", "/v1/requests?limit=100"]
        for name in ("greet", "summarise"):
            paths += [f"/v1/prompts/{name}", f"/v1/prompts/{name}/versions"]
            paths += [f"/v1/prompts/{name}/labels", f"/v1/prompts/{name}/versions/2"]
        paths += ["/v1/prompts/greet/versions/by-label/production/template"]
        paths += ["/v1/requests?metadata.team=a&limit=100", "/v1/requests?prompt_name=greet"]
        paths += ["/v1/requests?status=error", "/v1/requests/search?query=zebra"]
        paths += [f"/v1/requests/{record['id']}" for record in RECORDS]
        paths += [
            f"/v1/requests/analytics?{httpx.QueryParams({**query, **PERIOD})}"
            for query in ANALYTICS
        ]
        paths += [f"/v1/requests/exports/{export}", f"/v1/requests/exports/{export}/download"]
        for path in paths:
            response = api.get(path, headers={"X-API-Key": key})
            seen[f"{project} {path}"] = (response.status_code, normal(response, api))
    return seen


def normal(response: httpx.Response, api: httpx.Client) -> Any:
    """Return a JSON answer parsed, a download as text, with the collector's address out.

    Numbers are kept to 9 decimals: ClickHouse sums floats in the order its threads read the
    parts, so 1.32 may come back as 1.3200000000000003 from the very same rows.
    """
    text = response.text.replace(str(api.base_url).rstrip("/"), "<collector>")
    if not response.headers["content-type"].startswith("application/json"):
        return text
    return json.loads(text, parse_float=lambda number: round(float(number), 9))


def digest(data_dir: Path) -> dict[str, list[int | None]]:
    """Return each table's row count and row checksum in the store of ``data_dir``."""
    done = subprocess.run(
        [sys.executable, "-c", DIGEST, str(data_dir / "clickhouse")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    tables: dict[str, list[int | None]] = json.loads(done.stdout)
    return tables


def wait_for(lines: list[str], text: str) -> None:
    """Wait until the collector's output says ``text``."""
    deadline = time.monotonic() + 60
    while not any(text in line for line in lines):
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)


@dataclass(frozen=True)
class BackedUp:
    """A filled collector's store, backed up both ways, and what it answered before.

    ``made``: the backup command's result by mode (True: through the running collector, False:
    with it stopped); ``tables``: the digest of the source once stopped, after both backups.
    """

    source: Path
    backups: dict[bool, Path]
    made: dict[bool, subprocess.CompletedProcess[str]]
    keys: tuple[str, str, str]
    before: dict[str, Any]
    tables: dict[str, list[int | None]]


@pytest.fixture(scope="module")
def backed_up(tmp_path_factory: pytest.TempPathFactory) -> BackedUp:
    """Fill one collector, back it up through it and then with it stopped; then delete it.

    One fill (a collector start, three key commands, every read) serves both round trips.
    """
    root = tmp_path_factory.mktemp("round_trip")
    source = root / "source"
    backups = {True: root / "backup-online", False: root / "backup-offline"}
    log: list[str] = []
    lines: list[str] = []
    with collector(source, log, QUICK_ROLLUP, lines) as api:
        keys = fill(api, source)
        wait_for(lines, "rollup: sealed")
        before = reads(api, *keys)
        online = cli("backup", str(backups[True]), "--data-dir", str(source))
    offline = cli("backup", str(backups[False]), "--data-dir", str(source))
    tables = digest(source)
    # The old machine is gone: nothing of it may be needed, export files included.
    shutil.rmtree(source)
    return BackedUp(source, backups, {True: online, False: offline}, keys, before, tables)


@pytest.mark.parametrize("online", [True, False], ids=["through-the-collector", "offline"])
def test_a_round_trip_loses_nothing(backed_up: BackedUp, tmp_path: Path, online: bool) -> None:
    source, backup, target = backed_up.source, backed_up.backups[online], tmp_path / "target"
    made, tables, before = backed_up.made[online], backed_up.tables, backed_up.before
    team_key, revoked, export = backed_up.keys
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"backed up {source} to {backup}"
    assert not source.exists()

    restored = cli("restore", str(backup), "--data-dir", str(target))
    assert restored.returncode == 0, restored.stderr
    if not online:
        # Row for row, every table: the log, its indexes and copies, the rollup, the
        # registry, the key hashes and the export jobs.
        assert digest(target) == tables
        assert all(tables[name][0] for name in ("request_rollup", "request_seals", "exports"))
    log: list[str] = []
    with collector(target, log) as api:
        after = reads(api, team_key, revoked, export)

    assert after == before
    # What was compared is what the fill wrote, not a store of errors.
    assert before[f"team /v1/requests/exports/{export}/download"][0] == 200
    assert len(before["team /v1/requests/search?query=zebra"][1]["data"]) == 6
    assert before["team /v1/prompts?limit=100"][1]["pagination"]["total"] == 2
    assert before["default /v1/requests/req_b0"][0] == 200
    assert before["revoked"] == 401


def test_restore_refuses_a_store_with_data_and_replaces_it_when_asked(tmp_path: Path) -> None:
    store, backup = tmp_path / "store", tmp_path / "backup"
    log: list[str] = []
    with collector(store, log) as api:
        api.post("/v1/prompts", json={"name": "kept", "template": "x", "model": "gpt-4o"})
        # Through the running collector (one start fewer than stopping it to back up).
        assert cli("backup", str(backup), "--data-dir", str(store)).returncode == 0
        api.post("/v1/prompts", json={"name": "later", "template": "y", "model": "gpt-4o"})
        # A restore onto the data dir of a running collector is refused whatever it is given
        # (here on this test's collector: one start fewer than a collector of its own).
        running = cli("restore", str(backup), "--data-dir", str(store), "--replace")

    refused = cli("restore", str(backup), "--data-dir", str(store))
    with collector(store, log) as api:
        untouched = sorted(p["name"] for p in api.get("/v1/prompts").json()["data"])
    replaced = cli("restore", str(backup), "--data-dir", str(store), "--replace")
    with collector(store, log) as api:
        names = sorted(p["name"] for p in api.get("/v1/prompts").json()["data"])

    assert one_line(running) and "stop it, then restore" in running.stderr, running
    assert refused.returncode == 1
    assert one_line(refused) and "already holds data" in refused.stderr
    assert "--replace" in refused.stderr
    assert untouched == ["kept", "later"]
    assert replaced.returncode == 0, replaced.stderr
    assert names == ["kept"]


def one_line(result: subprocess.CompletedProcess[str]) -> bool:
    """Whether a command failed with exactly one line on stderr, no traceback, no stdout."""
    message = result.stderr.strip()
    return (
        result.returncode == 1
        and len(message.splitlines()) == 1
        and message.startswith("error: ")
        and "Traceback" not in result.stderr
        and not result.stdout
    )


def test_each_failure_is_one_clear_line(tmp_path: Path) -> None:
    store, backup, junk = tmp_path / "store", tmp_path / "backup", tmp_path / "junk"
    assert cli("keys", "create", "--project", "p", "--data-dir", str(store)).returncode == 0
    junk.mkdir()
    (junk / "notes.txt").write_text("not a backup")
    newer = tmp_path / "newer"
    (newer / "clickhouse").mkdir(parents=True)
    (newer / "clickhouse" / ".backup").write_text("<backup/>")
    manifest = {
        "format": 1,
        "promptrail_version": "9.0.0",
        "database": "promptrail",
        "schema_version": 999,
        "created_at": "2030-01-01T00:00:00+00:00",
        "export_files": 0,
    }
    (newer / "promptrail-backup.json").write_text(json.dumps(manifest))

    server = {"PROMPTRAIL_CLICKHOUSE_URL": "http://127.0.0.1:1/db"}
    none = tmp_path / "none"
    # These fail before any store is opened: they run beside the rest, not after it.
    early = {
        "no embedded store in": lambda: cli("backup", str(backup), "--data-dir", str(none)),
        "is not a promptrail backup": lambda: cli("restore", str(junk), "--data-dir", str(store)),
        "does not exist": lambda: cli("restore", str(backup), "--data-dir", str(tmp_path / "new")),
        "ClickHouse server": lambda: cli("backup", str(backup), env=server),
    }
    with ThreadPoolExecutor(len(early)) as pool:
        running = {expected: pool.submit(run) for expected, run in early.items()}
        # These open the store of ``store``: one at a time (one process may hold it).
        failures = {
            "exists and is not empty": cli("backup", str(junk), "--data-dir", str(store)),
            "made by a newer promptrail": cli("restore", str(newer), "--data-dir", str(store)),
        }
        failures.update({expected: done.result() for expected, done in running.items()})
    # A restore onto a running collector's data dir is refused in the test above, on its
    # collector.

    for expected, result in failures.items():
        assert one_line(result), (expected, result)
        assert expected in result.stderr, (expected, result.stderr)
    assert not backup.exists()
    assert sorted(p.name for p in junk.iterdir()) == ["notes.txt"]


def test_a_held_store_with_no_collector_answering_says_so(tmp_path: Path) -> None:
    silent = f"http://127.0.0.1:{free_port()}"
    with held_store(tmp_path) as holder:
        held = cli("backup", str(tmp_path / "b1"), "--data-dir", str(tmp_path))
        # ``keys create`` and ``serve`` on the same held store (one holder for all three).
        keys = cli("keys", "create", "--project", "x", "--data-dir", str(tmp_path))
        served = cli("serve", "--port", str(free_port()), "--data-dir", str(tmp_path))
        # A runtime file naming a live process whose collector does not answer.
        write_runtime(tmp_path, RuntimeInfo(silent, holder, "token"))
        unanswered = cli("backup", str(tmp_path / "b2"), "--data-dir", str(tmp_path))

    assert one_line(held) and "in use by another process" in held.stderr
    assert one_line(unanswered) and f"the collector at {silent} did not answer" in unanswered.stderr
    for result in (keys, served):
        assert result.returncode == 1
        assert "Traceback" not in result.stderr + result.stdout
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1, message
        assert "in use by another process" in message


def test_the_admin_route_backs_up_only_for_the_admin_token(api: TestClient, tmp_path: Path) -> None:
    api.app.state.admin_token = "secret"  # type: ignore[attr-defined]
    body = {"directory": str(tmp_path / "backup")}
    refused = [
        api.post("/v1/admin/backups", json=body),
        api.post("/v1/admin/backups", json=body, headers={"X-Promptrail-Admin": "wrong"}),
        api.get("/v1/admin/backups/backup_x", headers={"X-Promptrail-Admin": "wrong"}),
    ]
    admin = {"X-Promptrail-Admin": "secret"}
    relative = api.post("/v1/admin/backups", json={"directory": "backup"}, headers=admin)
    started = api.post("/v1/admin/backups", json=body, headers=admin)
    job = started.json()["data"]
    while job["status"] == "running":
        time.sleep(0.05)
        job = api.get(f"/v1/admin/backups/{job['job_id']}", headers=admin).json()["data"]

    assert [r.status_code for r in refused] == [401, 401, 401]
    assert all(r.json()["error"]["code"] == "INVALID_API_KEY" for r in refused)
    assert relative.status_code == 400
    assert relative.json()["error"]["details"]["field"] == "directory"
    assert started.status_code == 202
    assert job["status"] == "completed", job
    assert job["done_bytes"] == job["total_bytes"] > 0
    assert (tmp_path / "backup" / "promptrail-backup.json").is_file()
    # Key hashes and payloads: only the collector's user may enter the directory.
    assert (tmp_path / "backup").stat().st_mode & 0o777 == 0o700
