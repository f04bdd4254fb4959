"""``promptrail stub-provider`` as a demo runs it: a long life, a port that may be taken,
answers that follow the request (an echo, rules from ``--replies``, ``--fixed``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import openai

from promptrail.collector.cli import stub
from promptrail.testing import FIXED_REPLY, KEPT_CALLS, OpenAIStub

CLI = Path(sys.executable).parent / "promptrail"


@contextmanager
def stub_provider(*options: str) -> Iterator[tuple[list[str], dict[str, str]]]:
    """Run the command on a free port; yield its first lines and the variables it exports."""
    process = subprocess.Popen(
        [str(CLI), "stub-provider", "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        said: list[str] = []
        exports: dict[str, str] = {}
        while len(exports) < 4:
            line = process.stdout.readline()
            assert line, f"the stub stopped: {said}"
            said.append(line.rstrip("\n"))
            if line.startswith("export "):
                name, value = line.removeprefix("export ").strip().split("=", 1)
                exports[name] = value
        yield said, exports
    finally:
        process.terminate()
        process.communicate(timeout=30)


def ask_openai(env: dict[str, str], text: str, *, stream: bool = False) -> str:
    """Ask the stub through the openai SDK as an example would; return the answer's text."""
    with openai.OpenAI(
        base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"], max_retries=0
    ) as client:
        messages: list[openai.types.chat.ChatCompletionMessageParam] = [
            {"role": "user", "content": text}
        ]
        if stream:
            chunks = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True
            )
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        completion = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return completion.choices[0].message.content or ""


def ask_anthropic(env: dict[str, str], text: str, *, stream: bool = False) -> str:
    """Ask the stub through the anthropic SDK; return the answer's text."""
    with anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0
    ) as client:
        request = {
            "model": "claude-haiku-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": text}],
        }
        if stream:
            with client.messages.stream(**request) as events:  # type: ignore[arg-type]
                return "".join(events.text_stream)
        message = client.messages.create(**request)  # type: ignore[call-overload]
        return "".join(b.text for b in message.content if b.type == "text")


def test_by_default_it_echoes_the_last_user_message_in_both_wire_formats() -> None:
    with stub_provider() as (said, env):
        answers = {
            (ask, stream): ask(env, text, stream=stream)
            for ask, text in ((ask_openai, "Hello there?"), (ask_anthropic, "Hello  there?"))
            for stream in (False, True)
        }
        other = ask_openai(env, "Something else")

    assert "it answers with an echo of the last user message" in said
    assert set(answers.values()) == {"Echo: Hello there?"}
    assert other == "Echo: Something else"


def test_replies_from_a_file_answer_first_and_fixed_turns_the_echo_off(tmp_path: Path) -> None:
    rules = tmp_path / "replies.json"
    rules.write_text(
        json.dumps(
            [
                {"match": "refund", "reply": "Refunds take 5 days."},
                {"regex": "^(hi|hello)\\b", "reply": "Hello, human."},
            ]
        )
    )

    with stub_provider("--replies", str(rules)) as (said, env):
        echoed = [
            ask_openai(env, "Where is my REFUND?", stream=True),
            ask_anthropic(env, "hello you"),
            ask_anthropic(env, "Oh, hello", stream=True),
        ]
    with stub_provider("--replies", str(rules), "--fixed") as (fixed_said, fixed_env):
        fixed = [ask_openai(fixed_env, "refund?"), ask_anthropic(fixed_env, "Oh, hello")]

    assert f"it answers with the 2 rules of {rules}, else an echo of the last user message" in said
    assert echoed == ["Refunds take 5 days.", "Hello, human.", "Echo: Oh, hello"]
    assert f'it answers with the 2 rules of {rules}, else "{FIXED_REPLY}"' in fixed_said
    assert fixed == ["Refunds take 5 days.", FIXED_REPLY]


def test_a_bad_replies_file_is_one_clear_line_before_it_serves(tmp_path: Path) -> None:
    rules = tmp_path / "replies.json"
    rules.write_text('[{"regex": "(", "reply": "x"}]')

    refused = subprocess.run(
        [str(CLI), "stub-provider", "--port", "0", "--replies", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert refused.returncode == 1
    assert "export" not in refused.stdout
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: --replies: {rules}: rule 1: the regex does not compile")


def test_the_help_says_how_it_answers_and_its_fixed_line_is_the_stubs() -> None:
    shown = subprocess.run(
        [str(CLI), "stub-provider", "--help"], capture_output=True, text=True, timeout=60
    )

    assert shown.returncode == 0
    assert "--replies FILE" in shown.stdout and "--fixed" in shown.stdout
    assert '"Echo: "' in shown.stdout
    assert stub.FIXED_REPLY == FIXED_REPLY  # the command's words for the testing stubs' line


def test_the_call_log_keeps_the_newest_calls_only() -> None:
    stub = OpenAIStub()
    for number in range(2 * KEPT_CALLS + 1):
        stub.record("/v1/chat/completions", {}, {"n": number})

    assert len(stub.calls) <= 2 * KEPT_CALLS
    assert stub.calls[-1].body == {"n": 2 * KEPT_CALLS}
    assert stub.calls[0].body["n"] > 0


def test_a_taken_port_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [str(CLI), "stub-provider", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert refused.returncode == 1
    assert "export" not in refused.stdout
    assert refused.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: address already in use; stop what uses it "
        "or pass --port"
    ]
