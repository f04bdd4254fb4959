"""Templates for local execution: fetch by latest, version or label; render; the cache."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import promptrail
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import serve
from tests.keys import DEFAULT_KEY

from .conftest import RequestLog, greet


@contextmanager
def counted_client(url: str, seen: RequestLog, **options: Any) -> Iterator[promptrail.Client]:
    """A client of its own whose requests are logged in ``seen``."""
    http = httpx.Client(event_hooks={"request": [seen]})
    with http, promptrail.Client(DEFAULT_KEY, url, http_client=http, **options) as client:
        yield client


# -- fetch and render --------------------------------------------------------------------------


def test_template_by_latest_version_and_label(client: promptrail.Client) -> None:
    greet(client, parameters={"temperature": 0.3, "max_tokens": 64})
    client.prompts.update("greet", template="Hi {name} from {city}!", model="claude-sonnet-4")
    client.prompts.set_label("greet", "production", 1)

    latest = client.prompts.template("greet")
    first = client.prompts.template("greet", version=1)
    production = client.prompts.template("greet", label="production")

    assert (latest.version, latest.content) == (2, "Hi {{name}} from {{city}}!")
    assert (latest.provider, latest.model) == ("anthropic", "claude-sonnet-4")
    assert set(latest.variables) == {"name", "city"}
    assert latest.variables["name"].type == "string"
    assert latest.variable_names == ["name", "city"]
    assert (first.version, first.content) == (1, "Say hello to {{name}}.")
    assert (first.provider, first.temperature, first.max_tokens) == ("openai", 0.3, 64)
    assert production.version_id == first.version_id
    assert production.prompt_name == "greet"
    assert len(production.prompt_id) == 36


def test_every_template_says_whether_it_is_stale(client: promptrail.Client) -> None:
    # Code that checks ``tpl.stale`` before trusting a template must not need a try/except.
    greet(client)

    fetched = client.prompts.template("greet")
    with promptrail.Client(DEFAULT_KEY, "http://127.0.0.1:9", max_retries=0) as offline:
        fallback = offline.prompts.template("nowhere", fallback="Hello {{name}}!")

    assert fetched.stale is False
    assert fallback.stale is False


def test_render_fills_variables_and_keeps_literal_braces(client: promptrail.Client) -> None:
    greet(client, template='Reply in JSON like {{"name": "{name}"}} for {n} items: {tags}')

    tpl = client.prompts.template("greet")

    assert tpl.render(name="Ada", n=3, tags=["a", "b"]) == (
        'Reply in JSON like {"name": "Ada"} for 3 items: ["a", "b"]'
    )
    assert tpl.render({"name": "{{n}}", "n": 1, "tags": "x"}) == (
        'Reply in JSON like {"name": "{{n}}"} for 1 items: x'
    )


def test_render_names_every_missing_variable_sorted(client: promptrail.Client) -> None:
    greet(client, template="{name} in {city} on {day}")
    tpl = client.prompts.template("greet")

    with pytest.raises(promptrail.MissingVariablesError) as caught:
        tpl.render(city="Paris", extra="ignored")

    assert caught.value.missing_variables == ["day", "name"]
    assert "day, name" in str(caught.value)
    assert isinstance(caught.value, promptrail.ValidationError)
    assert caught.value.code == "INVALID_TEMPLATE"
    assert caught.value.details["template"] == "{{name}} in {{city}} on {{day}}"


def test_messages_follow_the_run_rules(client: promptrail.Client) -> None:
    greet(client, "system", template="You are terse. Speak {language}.")
    greet(client, "inline", template="Answer {user_input} in {language}.")

    system = client.prompts.template("system")
    inline = client.prompts.template("inline")

    assert system.messages(language="French") == [
        {"role": "user", "content": "You are terse. Speak French."}
    ]
    assert system.messages(language="French", user_input="Hi") == [
        {"role": "system", "content": "You are terse. Speak French."},
        {"role": "user", "content": "Hi"},
    ]
    assert inline.messages({"language": "German"}, user_input="why?") == [
        {"role": "user", "content": "Answer why? in German."}
    ]


def test_a_label_and_a_version_at_once_are_refused(client: promptrail.Client) -> None:
    with pytest.raises(ValueError, match="not both"):
        client.prompts.template("greet", label="production", version=1)


def test_unknown_prompts_and_labels_raise_not_found(client: promptrail.Client) -> None:
    greet(client)

    with pytest.raises(promptrail.NotFoundError) as prompt:
        client.prompts.template("missing")
    with pytest.raises(promptrail.NotFoundError) as label:
        client.prompts.template("greet", label="production")

    assert prompt.value.code == "PROMPT_NOT_FOUND"
    assert label.value.code == "LABEL_NOT_FOUND"


# -- the cache ---------------------------------------------------------------------------------


def test_a_second_fetch_within_the_ttl_sends_no_request(
    client: promptrail.Client, requests_seen: RequestLog
) -> None:
    greet(client)
    client.prompts.set_label("greet", "production", 1)

    first = client.prompts.template("greet", label="production")
    second = client.prompts.template("greet", label="production")
    other_key = client.prompts.template("greet", version=1)

    assert second is first
    assert other_key.version == 1
    assert requests_seen.count("/template") == 2


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def read_across_expiry(
    runs_url: str, client: promptrail.Client, name: str, ttl: float
) -> tuple[list[int], bool, int] | None:
    """Read a template cached for ``ttl`` s before and after an update, then past expiry.

    Returns the versions read (first, cached, stale), whether version 2 came within the wait,
    and the template fetches; None when the update outlasted the TTL (nothing proven).
    """
    greet(client, name)
    client.prompts.set_label(name, "production", 1)
    seen = RequestLog()
    with counted_client(runs_url, seen, template_ttl=ttl) as reader:
        started = time.monotonic()  # the copy is fetched after this
        before = reader.prompts.template(name, label="production")
        client.prompts.update(name, template="Hi {name}!", labels=["production"])
        cached = reader.prompts.template(name, label="production")
        if time.monotonic() - started >= ttl:
            return None  # the copy may have expired before the second read
        time.sleep(ttl + 0.1)
        # Expired: the old copy is served at once while one background refresh runs.
        stale = reader.prompts.template(name, label="production")
        after = wait_for(lambda: reader.prompts.template(name, label="production").version == 2)
    return [before.version, cached.version, stale.version], after, seen.count("/template")


def test_the_cache_expires_after_its_ttl(runs_url: str, client: promptrail.Client) -> None:
    # A short TTL keeps this short. On a machine so busy that the update outlasts it, the
    # second read comes after expiry and proves nothing: then the test takes a longer TTL.
    for attempt, ttl in enumerate((0.3, 1.0, 3.0)):
        outcome = read_across_expiry(runs_url, client, f"greet{attempt}", ttl)
        if outcome is not None:
            break
    else:
        raise AssertionError("the update outlasted every TTL tried")
    versions, after, fetches = outcome

    assert versions == [1, 1, 1]
    assert after
    assert fetches == 2


def test_a_ttl_per_call_overrides_the_clients(runs_url: str, client: promptrail.Client) -> None:
    greet(client)
    seen = RequestLog()

    with counted_client(runs_url, seen, template_ttl=0) as reader:
        for _ in range(3):
            reader.prompts.template("greet", ttl=60)
        kept = seen.count("/template")
        reader.prompts.template("greet", label=None, version=1, ttl=0)
        reader.prompts.template("greet", label=None, version=1, ttl=0)
        refreshed = wait_for(lambda: seen.count("/template") == 3)

    assert kept == 1
    assert refreshed


def test_changes_made_through_the_same_client_are_seen_at_once(
    client: promptrail.Client,
) -> None:
    greet(client)
    client.prompts.set_label("greet", "production", 1)
    assert client.prompts.template("greet", label="production").version == 1

    client.prompts.update("greet", template="Hi {name}!")
    client.prompts.set_label("greet", "production", 2)

    assert client.prompts.template("greet", label="production").version == 2
    assert client.prompts.template("greet").version == 2


def test_clearing_the_cache_refetches(client: promptrail.Client, requests_seen: RequestLog) -> None:
    greet(client)

    client.prompts.template("greet")
    client.clear_template_cache()
    client.prompts.template("greet")

    assert requests_seen.count("/template") == 2


def test_a_stale_copy_is_served_while_the_collector_is_down(
    run_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    seen = RequestLog()
    http = httpx.Client(event_hooks={"request": [seen]})
    with http:
        with serve(create_app(run_settings)) as url:
            client = promptrail.Client(
                DEFAULT_KEY, url, http_client=http, template_ttl=0.1, max_retries=0
            )
            greet(client)
            client.prompts.set_label("greet", "production", 1)
            fetched = client.prompts.template("greet", label="production")
        time.sleep(0.15)  # the collector is stopped and the copy has expired

        with caplog.at_level(logging.WARNING, logger="promptrail"):
            served = client.prompts.template("greet", label="production")
            assert wait_for(lambda: "serving the cached template" in caplog.text)
            again = client.prompts.template("greet", label="production")

    assert served == fetched
    assert again is served
    assert seen.count("/template") == 2  # one failed refresh, then the copy is trusted a TTL
    assert "serving the cached template of 'greet'" in caplog.text
    assert "version 1" in caplog.text


def test_a_stale_copy_is_served_when_the_collector_answers_5xx(runs_url: str) -> None:
    failing = threading.Event()
    real = httpx.HTTPTransport()

    class FlakyTransport(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if failing.is_set():
                return httpx.Response(503, json={"error": {"code": "STORE_UNAVAILABLE"}})
            return real.handle_request(request)

        def close(self) -> None:
            real.close()

    http = httpx.Client(transport=FlakyTransport())
    with http, promptrail.Client(DEFAULT_KEY, runs_url, http_client=http, max_retries=0) as client:
        greet(client)
        fetched = client.prompts.template("greet", ttl=0)
        failing.set()
        served = client.prompts.template("greet", ttl=0)
        with pytest.raises(promptrail.PromptrailError) as caught:
            client.prompts.template("greet", version=1)

    assert served is fetched
    assert caught.value.status == 503


def test_nothing_cached_and_the_collector_down_raises(closed_url: str) -> None:
    with (
        promptrail.Client(DEFAULT_KEY, closed_url, max_retries=0) as client,
        pytest.raises(promptrail.APIConnectionError),
    ):
        client.prompts.template("greet", label="production")


def test_a_deleted_prompt_is_not_served_stale(client: promptrail.Client) -> None:
    greet(client)
    client.prompts.template("greet", ttl=0)
    client.prompts.delete("greet")

    with pytest.raises(promptrail.NotFoundError):
        client.prompts.template("greet", ttl=0)


def test_the_cache_is_safe_across_threads(runs_url: str, client: promptrail.Client) -> None:
    greet(client)
    seen = RequestLog()
    results: list[promptrail.PromptTemplate] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def fetch() -> None:
        try:
            start.wait()
            for _ in range(20):
                results.append(reader.prompts.template("greet"))
        except BaseException as exc:
            errors.append(exc)

    with counted_client(runs_url, seen) as reader:
        threads = [threading.Thread(target=fetch) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert errors == []
    assert len(results) == 160
    assert {t.version_id for t in results} == {results[0].version_id}
    assert 1 <= seen.count("/template") <= 8


def test_a_fallback_is_used_when_nothing_can_be_fetched() -> None:
    with promptrail.Client(DEFAULT_KEY, "http://127.0.0.1:9", max_retries=0) as client:
        template = client.prompts.template("greet", fallback="Hello {{name}}, welcome!")

    assert template.render(name="Ada") == "Hello Ada, welcome!"
    assert (template.prompt_name, template.version) == ("greet", 0)
