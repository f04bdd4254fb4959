"""A real ``promptrail serve`` names the connections' key file in its start-up lines, makes it
0600, never logs a connection's secret; ``promptrail backup`` leaves the key file out and says
that restoring the connections needs it."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.collector.processes import cli, collector

SECRET = "sk-process-secret-key-7777"
HEADER_SECRET = "process-header-secret-8888"


def test_serve_names_the_key_file_and_backup_leaves_it_out(tmp_path: Path) -> None:
    data_dir, backup = tmp_path / "data", tmp_path / "backup"
    key_file = data_dir / "connections.key"
    log: list[str] = []
    lines: list[str] = []
    with collector(data_dir, log, lines=lines) as api:
        made = api.post(
            "/v1/connections",
            json={
                "name": "team",
                "provider": "openai_compatible",
                "api_key": SECRET,
                "base_url": "http://127.0.0.1:9/v1",
                "models": ["llama"],
                "headers": {"X-Org": HEADER_SECRET},
            },
        )
        assert made.status_code == 201, made.text
        checked = api.post("/v1/connections/team/check")
        assert checked.json()["data"]["status"] == "unreachable"
        backed_up = cli("backup", str(backup), "--data-dir", str(data_dir))
    output = "".join(log)
    assert f"connections' secret key: {key_file.resolve()}" in output
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert backed_up.returncode == 0, backed_up.stderr
    assert f"not backed up: {key_file.resolve()}" in backed_up.stderr
    assert "restoring the connections needs it" in backed_up.stderr
    listed = [p for p in backup.rglob("*") if p.is_file()]
    assert listed and not any(p.name == "connections.key" for p in listed)
    key = key_file.read_bytes().strip()
    for path in listed:
        raw = path.read_bytes()
        assert SECRET.encode() not in raw and HEADER_SECRET.encode() not in raw, path
        assert key not in raw, path
    for text in (output, backed_up.stdout, backed_up.stderr):
        assert SECRET not in text and HEADER_SECRET not in text
