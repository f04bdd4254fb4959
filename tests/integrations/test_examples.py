"""The capture examples run as a user runs them, against the OpenAI stub and a live collector."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integrations.conftest import KEY
from tests.stubs.openai_stub import OpenAIStub

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("script", "expected_spans"),
    [
        ("quickstart_openai.py", {"chat gpt-4o-mini"}),
        ("observe_decorator.py", {"handle", "answer", "retrieve", "chat gpt-4o-mini"}),
        ("otel_exporter.py", {"openai.chat"}),
    ],
)
def test_example_lands_records(
    live_url: str, openai_stub: OpenAIStub, script: str, expected_spans: set[str]
) -> None:
    openai_stub.reset()
    env = {
        **os.environ,
        "PROMPTRAIL_API_KEY": KEY,
        "PROMPTRAIL_BASE_URL": live_url,
        "OPENAI_API_KEY": "sk-stub",
        "OPENAI_BASE_URL": f"{openai_stub.url}/v1",
    }

    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert openai_stub.script.reply in done.stdout
    records = httpx.get(
        f"{live_url}/v1/requests", params={"limit": 100}, headers={"X-API-Key": KEY}
    ).json()["data"]
    names = {
        httpx.get(f"{live_url}/v1/requests/{r['id']}", headers={"X-API-Key": KEY}).json()["data"][
            "span_name"
        ]
        for r in records
    }
    assert names >= expected_spans, names
