"""Every example runs as a user runs it: ``promptrail stub-provider`` and a live collector.

This is ``make examples``. The stub is the real command, in its own process, and the examples
get the variables it prints, as the README says to export them; the collector runs prompts
against the same stub. Each example's records must arrive, with the model the examples' one
model variable names.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import ECHO_PREFIX, serve
from tests.keys import DEFAULT_KEY

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
README = EXAMPLES.parent / "README.md"
CLI = Path(sys.executable).parent / "promptrail"
MODEL = "gpt-4.1-nano"  # not any example's default: proves each reads the one variable


@dataclass(frozen=True)
class Expect:
    """What an example leaves in the log."""

    spans: set[str] = field(default_factory=set)
    prompts: set[str] = field(default_factory=set)
    records: int = 1
    linked: int = 0
    """Records of ``prompts`` carrying the prompt's version, of these ``providers``."""
    providers: set[str] = field(default_factory=set)


RUNS = {
    "quickstart_openai.py": Expect(spans={f"chat {MODEL}"}),
    "observe_decorator.py": Expect(spans={"handle", "answer", "retrieve", f"chat {MODEL}"}),
    "otel_exporter.py": Expect(spans={"openai.chat"}),
    "local_template.py": Expect(prompts={"support-reply"}),
    "run_prompt.py": Expect(prompts={"example-greeting"}, records=2),
    "experiment.py": Expect(prompts={"example-support"}, records=8),
    "langchain_chain.py": Expect(spans={"RunnableSequence", "LangGraph", f"chat {MODEL}"}),
    "llamaindex_chat.py": Expect(spans={"answer", "OpenAI.chat", f"chat {MODEL}"}),
    "fastapi_middleware.py": Expect(spans={f"chat {MODEL}"}, records=2),
    "feedback_fastapi.py": Expect(spans={f"chat {MODEL}"}),
    "pydantic_ai_agent.py": Expect(spans={"invoke_agent greeter", f"chat {MODEL}"}, records=2),
    # Two OpenAI calls (the tool call, then the answer to its result), one Anthropic call.
    "chat_tools.py": Expect(
        prompts={"example-weather-advice"},
        records=3,
        linked=3,
        providers={"openai", "anthropic"},
    ),
}


@pytest.fixture(scope="module")
def stub_env() -> Iterator[dict[str, str]]:
    """Run ``promptrail stub-provider`` on a free port; yield the variables it says to export."""
    process = subprocess.Popen(
        [str(CLI), "stub-provider", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        exports: dict[str, str] = {}
        while len(exports) < 4:
            line = process.stdout.readline()
            assert line, f"the stub stopped: {exports}"
            if line.startswith("export "):
                name, value = line.removeprefix("export ").strip().split("=", 1)
                exports[name] = value
        yield exports
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.fixture
def collector(settings: Settings, stub_env: dict[str, str]) -> Iterator[str]:
    """A live collector whose prompt runs go to the stub, as the README's ``make demo``."""
    provider = settings.model_copy(
        update={
            "openai_base_url": stub_env["OPENAI_BASE_URL"],
            "openai_api_key": SecretStr(stub_env["OPENAI_API_KEY"]),
            "anthropic_base_url": stub_env["ANTHROPIC_BASE_URL"],
            "anthropic_api_key": SecretStr(stub_env["ANTHROPIC_API_KEY"]),
            # The README's rule is judged sooner (the worker's 0.5 s passes made its snippet,
            # which looks once a second, wait a second more now and then).
            "evaluation_poll_seconds": 0.1,
        }
    )
    with serve(create_app(provider)) as url:
        yield url


def test_every_example_is_run_here_and_says_how_to_run_it() -> None:
    scripts = sorted(path.name for path in EXAMPLES.glob("*.py"))

    assert scripts == sorted(RUNS)
    for script in scripts:
        source = (EXAMPLES / script).read_text()
        doc = ast.get_docstring(ast.parse(source)) or ""
        assert "sk-..." in doc and ("stub-provider" in doc or "make demo" in doc), script
        assert set(re.findall(r"[A-Z_]*MODEL[A-Z_]*", source)) == {"PROMPTRAIL_EXAMPLE_MODEL"}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_runs_against_the_stub_and_its_records_arrive(
    collector: str, stub_env: dict[str, str], script: str
) -> None:
    expect = RUNS[script]
    env = {
        **os.environ,
        **stub_env,
        "PROMPTRAIL_API_KEY": DEFAULT_KEY,
        "PROMPTRAIL_BASE_URL": collector,
        "PROMPTRAIL_EXAMPLE_MODEL": MODEL,
    }

    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert ECHO_PREFIX in done.stdout  # the stub's answer, echoing what the example asked
    with httpx.Client(base_url=collector, headers={"X-API-Key": DEFAULT_KEY}) as api:
        # Every kind and environment: the examples' observed functions are spans, their
        # experiments' runs the service's own (docs/api-notes.md, "Environments").
        everything = {"limit": 100, "kind": "all", "environment": "all"}
        listed = api.get("/v1/requests", params=everything).json()["data"]
        details = [api.get(f"/v1/requests/{r['id']}").json()["data"] for r in listed]
    assert len(listed) >= expect.records, listed
    assert {r["span_name"] for r in details} >= expect.spans
    assert {r["prompt_name"] for r in listed} >= expect.prompts
    models = {r["model"] for r in listed if r["model"]}
    assert models == {MODEL}, models
    linked = [r for r in details if r["prompt_name"] in expect.prompts and r["version"]]
    assert len(linked) >= expect.linked, listed
    if expect.providers:
        assert {r["provider"] for r in linked} == expect.providers, linked


def readme_block(heading: str) -> str:
    """The first Python block under a heading of the README."""
    after = README.read_text().split(f"\n{heading}\n", 1)[1]
    return after.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_readme_chat_prompt_quick_start_runs_and_links_its_call_to_the_version(
    collector: str, stub_env: dict[str, str]
) -> None:
    snippet = readme_block("### A chat prompt")
    env = {**os.environ, **stub_env, "PROMPTRAIL_API_KEY": DEFAULT_KEY}
    env["PROMPTRAIL_BASE_URL"] = collector

    # Twice: a reader runs it again, and the prompt made the first time is used.
    runs = [
        subprocess.run(
            [sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=120
        )
        for _ in range(2)
    ]

    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{ECHO_PREFIX}What should I pack for Lisbon?"
    with httpx.Client(base_url=collector, headers={"X-API-Key": DEFAULT_KEY}) as api:
        listed = api.get("/v1/requests", params={"prompt_name": "trip-helper"}).json()["data"]
    assert [(r["version"], r["input_variables"]) for r in listed] == 2 * [
        (1, {"name": "Ada", "question": "What should I pack for Lisbon?"})
    ]


def test_readme_online_evaluation_judges_a_production_answer(
    collector: str, stub_env: dict[str, str]
) -> None:
    env = {**os.environ, **stub_env, "PROMPTRAIL_API_KEY": DEFAULT_KEY}
    env["PROMPTRAIL_BASE_URL"] = collector
    snippets = [readme_block("### A chat prompt"), readme_block("### Online evaluation")]

    # The chat prompt's snippet first, as the README says; the rule's snippet twice: a reader
    # runs it again, and the judge, its evaluator and its rule made the first time are used.
    for snippet in [snippets[0], snippets[1], snippets[1]]:
        done = subprocess.run(
            [sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr

    decision, *_, cost = done.stdout.split()
    assert decision == "scored", done.stdout
    assert float(cost) > 0  # the judge's call, priced
    with httpx.Client(base_url=collector, headers={"X-API-Key": DEFAULT_KEY}) as api:
        rules = api.get("/v1/evaluation-rules").json()["data"]
        judged = api.get("/v1/requests", params={"prompt_name": "trip-helper"}).json()["data"]
        scores = api.get("/v1/scores", params={"name": "helpful"}).json()["data"]
        evaluation = {"environment": "promptrail-evaluation"}
        judges = api.get("/v1/requests", params=evaluation).json()["data"]
    assert [r["name"] for r in rules] == ["helpful answers"]
    # The chat snippet's call came before the rule: only the two answers after it are judged.
    assert len(judged) == 3
    assert sorted(s["request_id"] for s in scores) == sorted(r["id"] for r in judged[:2])
    # The echoing stub names "good" first: the category's value.
    assert {(s["value"], s["source"]) for s in scores} == {(1, "eval")}
    assert len(judges) == 2 and all(j["prompt_name"] == "judge-helpful" for j in judges)
