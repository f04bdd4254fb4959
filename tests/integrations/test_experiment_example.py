"""``examples/experiment.py`` moves ``production`` only when the comparison says "better".

Against the provider stub's default answers (an echo of the prompt, as ``make demo`` serves)
version 2's answers carry the help center's address and version 1's do not: the comparison
says "better" and the label moves. Against the stub's fixed line (``--fixed``) both versions
answer alike: "no clear difference", and the label stays where it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import AnthropicStub, OpenAIStub, Replies, both, serve
from tests.keys import DEFAULT_KEY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiment.py"


def run_example(settings: Settings, replies: Replies | None) -> tuple[str, int]:
    """Run the example against a stub answering with ``replies`` (None: the fixed line) and a
    collector whose runs go to it; return its output and the version ``production`` ends on."""
    openai_stub, anthropic_stub = OpenAIStub(), AnthropicStub()
    openai_stub.script.replies = anthropic_stub.script.replies = replies
    with serve(both(openai_stub, anthropic_stub), lifespan="off") as stub_url:
        provider = settings.model_copy(
            update={"openai_base_url": f"{stub_url}/v1", "openai_api_key": SecretStr("sk-stub")}
        )
        with serve(create_app(provider)) as url:
            env = {
                **os.environ,
                "OPENAI_BASE_URL": f"{stub_url}/v1",
                "OPENAI_API_KEY": "sk-stub",
                "PROMPTRAIL_API_KEY": DEFAULT_KEY,
                "PROMPTRAIL_BASE_URL": url,
            }
            done = subprocess.run(
                [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            with httpx.Client(base_url=url, headers={"X-API-Key": DEFAULT_KEY}) as api:
                labels = api.get("/v1/prompts/example-support/labels")
                assert labels.status_code == 200, labels.text
                production = {x["label"]: x["version"] for x in labels.json()["data"]}["production"]
    return done.stdout, int(production)


def test_an_echoing_stub_shows_a_real_difference_and_the_label_moves(settings: Settings) -> None:
    out, production = run_example(settings, Replies())

    assert "v1: How do I reset my password? -> Echo: Answer the customer's question" in out
    assert "dataset 'example-thumbed-down': 2 records from the log" in out
    assert (
        "links_help_center: 0.000 -> 1.000 (delta +1.000, 95% [+1.000, +1.000]; "
        "2 better, 0 worse): better"
    ) in out
    assert "brief: 1.000 -> 1.000" in out and "no clear difference" in out
    assert out.rstrip().endswith("production moves to v2: links_help_center better")
    assert production == 2


def test_a_stub_with_one_fixed_line_shows_no_difference_and_the_label_stays(
    settings: Settings,
) -> None:
    out, production = run_example(settings, None)

    assert "0 better, 0 worse): no clear difference" in out
    assert "): better" not in out and "): worse" not in out
    assert out.rstrip().endswith("production stays on v1: no score is better")
    assert production == 1
