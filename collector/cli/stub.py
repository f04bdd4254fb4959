"""``promptrail stub-provider``: the OpenAI and Anthropic wire-format stubs on one port."""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from .shared import exit_cleanly, group, listen, url_host

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
) -> None:
    """Serve a local stand-in for OpenAI and Anthropic, for examples and demos.

    It speaks both wire formats (chat completions and messages, whole or streamed), answers
    every call with the same short reply, counts words as tokens and accepts any key. It prints
    the variables to export, for the examples and for a collector's runs. Not a model: for
    trying promptrail without provider access.
    """
    import uvicorn

    from promptrail.testing import AnthropicStub, OpenAIStub, both

    listener = listen(host, port)
    base_url = f"http://{url_host(host)}:{listener.getsockname()[1]}"
    print(f"promptrail stub provider (OpenAI and Anthropic wire formats) on {base_url}")
    print("point the examples and the collector at it with:")
    for name, value in stub_environment(base_url).items():
        print(f"export {name}={value}")
    sys.stdout.flush()
    config = uvicorn.Config(both(OpenAIStub(), AnthropicStub()), log_level="warning")
    signal.signal(signal.SIGTERM, exit_cleanly)
    uvicorn.Server(config).run(sockets=[listener])
