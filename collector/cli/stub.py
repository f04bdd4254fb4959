"""``promptrail stub-provider``: the OpenAI and Anthropic wire-format stubs on one port."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .shared import exit_cleanly, fail, group, listen, url_host

if TYPE_CHECKING:
    from promptrail.testing import Replies

# The testing package imports starlette and uvicorn: the command imports it when it runs (the
# CLI's --help starts without them); this line is its Script's default reply.
FIXED_REPLY = "Hello from the stub provider."

app = group()

# What a client needs to reach the stub: the base URLs as the providers' SDKs read them, and a
# key (the stub accepts any; the openai SDK refuses to start without one).
STUB_KEYS = {"OPENAI_API_KEY": "sk-stub", "ANTHROPIC_API_KEY": "sk-ant-stub"}


def stub_environment(base_url: str) -> dict[str, str]:
    """Return the variables that point the OpenAI and Anthropic SDKs at a stub provider."""
    return {
        "OPENAI_BASE_URL": f"{base_url}/v1",
        "OPENAI_API_KEY": STUB_KEYS["OPENAI_API_KEY"],
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": STUB_KEYS["ANTHROPIC_API_KEY"],
    }


@app.command("stub-provider")
def stub_provider(
    host: Annotated[str, typer.Option(metavar="HOST", help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port, 0 for any free one")] = 8100,
    replies: Annotated[
        Path | None,
        typer.Option(
            "--replies",
            metavar="FILE",
            help='Answer by rules from a JSON file: [{"match": "password", "reply": "..."}, '
            '{"regex": "^Translate", "reply": "..."}, ...]; the first rule whose match '
            "(a substring, any case) or regex is found in the last user message answers",
        ),
    ] = None,
    fixed: Annotated[
        bool,
        typer.Option(
            "--fixed",
            help=f'No echo: what no rule answers gets the fixed line "{FIXED_REPLY}"',
        ),
    ] = False,
) -> None:
    """Serve a local stand-in for OpenAI and Anthropic, for examples and demos.

    It speaks both wire formats (chat completions and messages, whole or streamed), counts
    words as tokens and accepts any key. Its answers are deterministic and follow the
    request: by default "Echo: " and the last user message (its whitespace folded), so two
    prompt versions get different answers an experiment can score; --replies FILE answers
    by rules first; --fixed answers everything else with the one fixed line. A request with
    no user text gets the fixed line. It prints the variables to export, for the examples
    and for a collector's runs. Not a model: for trying promptrail without provider access.
    """
    import uvicorn

    from promptrail.testing import AnthropicStub, OpenAIStub, Replies, both

    try:
        answers = Replies.load(replies, echo=not fixed) if replies else Replies(echo=not fixed)
    except ValueError as exc:
        raise fail(f"--replies: {exc}") from None
    listener = listen(host, port)
    base_url = f"http://{url_host(host)}:{listener.getsockname()[1]}"
    print(f"promptrail stub provider (OpenAI and Anthropic wire formats) on {base_url}")
    print(f"it answers with {describe(answers, replies)}")
    print("point the examples and the collector at it with:")
    for name, value in stub_environment(base_url).items():
        print(f"export {name}={value}")
    sys.stdout.flush()
    openai, anthropic = OpenAIStub(), AnthropicStub()
    openai.script.replies = anthropic.script.replies = answers
    config = uvicorn.Config(both(openai, anthropic), log_level="warning")
    signal.signal(signal.SIGTERM, exit_cleanly)
    uvicorn.Server(config).run(sockets=[listener])


def describe(answers: Replies, path: Path | None) -> str:
    """How the stub answers, for its first lines."""
    rest = "an echo of the last user message" if answers.echo else f'"{FIXED_REPLY}"'
    if path is None:
        return rest
    return f"the {len(answers.rules)} rules of {path}, else {rest}"
