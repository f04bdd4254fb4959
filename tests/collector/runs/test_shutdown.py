"""A collector's shutdown closes its pooled provider connections before its loop ends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.collector.runs.steps import create_prompt, run
from tests.keys import DEFAULT_AUTH


def test_shutdown_waits_for_the_provider_connections_to_close(
    run_settings: Settings, openai_stub: OpenAIStub
) -> None:
    app = create_app(run_settings)
    # uvicorn, as `promptrail serve` runs it: its loop ends right after the lifespan's shutdown.
    with serve(app) as url, httpx.Client(base_url=url, headers=DEFAULT_AUTH) as api:
        create_prompt(api)
        # Runs at once hold several pooled connections to the provider when the app stops
        # (an example's collector ended with "unclosed transport" errors when the loop ended
        # before the close it had scheduled).
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: run(api, variables={"name": "Ada"}), range(4)))
        assert all(result["output"] for result in results)
        client = app.state.services.runs._providers["openai"]._client
        assert isinstance(client, httpx.AsyncClient) and not client.is_closed
    assert client.is_closed
