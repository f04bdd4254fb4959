"""``promptrail keys list | revoke | rotate`` as an operator runs them: real processes.

With a collector running on the data dir the commands go through it (the embedded store is
its own); without one they open the store themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx

from promptrail.collector.runtime_file import RuntimeInfo, write_runtime
from promptrail.testing import free_port
from tests.collector.contract import assert_error
from tests.collector.processes import KEY, cli, collector


def id_of(key: str) -> str:
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def works(api: httpx.Client, key: str) -> bool:
    """Whether the collector serves ``key``; a refusal must be the contract's 401."""
    response = api.get("/v1/prompts", headers={"Authorization": f"Bearer {key}"})
    if response.status_code != 200:
        assert_error(response, 401, "INVALID_API_KEY", type_="authentication_error")
    return response.status_code == 200


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    result = cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command prints: no traceback, a non-zero exit."""
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    return message


def listed(data_dir: Path, *args: str) -> dict[str, dict[str, Any]]:
    shown = ok("keys", "list", "--json", "--data-dir", str(data_dir), *args)
    return {key["key_id"]: key for key in json.loads(shown.stdout)}


def test_the_commands_open_the_store_themselves_then_go_through_the_running_collector(
    tmp_path: Path,
) -> None:
    # One data dir for both ways (the store opened by each command while no collector runs,
    # then the running collector): a collector start and stop fewer than a data dir each.
    data_dir = str(tmp_path)
    used = ok("keys", "create", "--project", "team", "--data-dir", data_dir).stdout.strip()
    unused = ok("keys", "create", "--project", "team", "--data-dir", data_dir).stdout.strip()
    log: list[str] = []
    with collector(tmp_path, log) as api:
        assert works(api, used)

    # The collector wrote the key's last use as it stopped.
    team = listed(tmp_path, "--project", "team")
    assert team[id_of(used)]["last_used_at"] is not None
    assert team[id_of(unused)]["last_used_at"] is None

    ok("keys", "revoke", id_of(used), "--data-dir", data_dir)
    unknown = cli("keys", "revoke", "pr-nobody-was-given-this", "--data-dir", data_dir)
    assert "pr-nobody-was-given-this" not in one_line_error(unknown)
    nothing = cli("keys", "rotate", "--project", "ghost", "--data-dir", data_dir)
    assert "ghost" in one_line_error(nothing)
    rotated = json.loads(
        ok("keys", "rotate", "--project", "team", "--json", "--data-dir", data_dir).stdout
    )
    new = rotated["api_key"]
    assert [k["key_id"] for k in rotated["revoked"]] == [id_of(unused)]
    assert set(listed(tmp_path, "--project", "team")) == {id_of(new)}
    assert {k: v["status"] for k, v in listed(tmp_path, "--all").items()} == {
        id_of(KEY): "active",
        id_of(used): "revoked",
        id_of(unused): "revoked",
        id_of(new): "active",
    }

    with collector(tmp_path, log) as api:
        assert not works(api, used)
        assert not works(api, unused)
        assert works(api, new)

        # Now through the running collector, in a project of its own (the listings above
        # stay exact).
        key = ok("keys", "create", "--project", "crew", "--data-dir", data_dir).stdout.strip()
        assert works(api, key)

        table = ok("keys", "list", "--data-dir", data_dir)
        assert id_of(key) in table.stdout and id_of(KEY) in table.stdout
        assert "crew" in table.stdout and key[:8] in table.stdout
        for secret in (key, KEY, hashlib.sha256(key.encode()).hexdigest()):
            assert secret not in table.stdout + table.stderr
        crew_keys = listed(tmp_path, "--project", "crew")
        assert set(crew_keys) == {id_of(key)}
        assert crew_keys[id_of(key)]["last_used_at"] is not None  # the collector's own memory

        rotation = ok(
            "keys", "rotate", "--project", "crew", "--grace", "3600", "--data-dir", data_dir
        )
        successor = rotation.stdout.strip()  # the one line on stdout: the successor key
        assert successor.startswith("pr-") and successor != key
        assert f"{id_of(key)} " in rotation.stderr and "stops working at" in rotation.stderr
        assert works(api, key) and works(api, successor)
        assert {k: v["status"] for k, v in listed(tmp_path, "--project", "crew").items()} == {
            id_of(key): "expiring",
            id_of(successor): "active",
        }

        revoked = ok("keys", "revoke", key, "--data-dir", data_dir)  # the key itself
        assert not works(api, key)
        assert key not in revoked.stdout + revoked.stderr
        assert id_of(key) in revoked.stderr

        unknown_id = cli("keys", "revoke", "key_0123456789ab", "--data-dir", data_dir)
        assert "key_0123456789ab" in one_line_error(unknown_id)

        newest = ok("keys", "rotate", "--project", "crew", "--data-dir", data_dir).stdout.strip()
        assert not works(api, successor)
        assert works(api, newest) and works(api, KEY)
    assert log[-1] == "exit=0"


def test_a_collector_or_server_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    # A runtime file of a live process (this one) whose collector is gone from its port.
    gone = f"http://127.0.0.1:{free_port()}"
    write_runtime(tmp_path, RuntimeInfo(gone, os.getpid(), "token"))
    via_collector = cli("keys", "list", "--data-dir", str(tmp_path))
    server = f"http://default:@127.0.0.1:{free_port()}/"
    on_server = cli("keys", "revoke", "key_0123456789ab", env={"PROMPTRAIL_CLICKHOUSE_URL": server})

    assert gone in one_line_error(via_collector)
    assert "cannot open the store" in one_line_error(on_server)
