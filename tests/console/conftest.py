"""Browser fixtures: a headless Chromium (Debian's) and a fresh page per test.

The console is driven against a live collector (``console_url``) with records logged through the
public API, as a user's application would log them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.keys import DEFAULT_KEY

# Playwright is imported by the first console test a worker runs (``browser``, ``expect``), not
# here: every test worker collects tests/console, and most of them never open a browser
# (docs/architecture.md, "Tests").
if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page

CHROMIUM = "/usr/bin/chromium"
# Test runs write their screenshots under build/ (ignored by git): a run must not leave the tree
# modified, and the pages show server-set times. `make screenshots` writes docs/screenshots.
REVIEW_SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
SCREENSHOTS = Path(os.environ.get("PROMPTRAIL_SCREENSHOTS") or REVIEW_SCREENSHOTS)
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# A waiting assertion returns as soon as it holds, so a longer bound costs a passing test
# nothing; Playwright's 5 s default failed tests whose page was merely slow on a loaded machine
# (the key check still "Checking the key…" after 5 s with the suite and other work running).
EXPECT_TIMEOUT_MS = 15_000


def expect(actual: Any, message: str | None = None) -> Any:
    """Playwright's ``expect`` (its waiting assertions on a page or locator), with the console
    tests' timeout."""
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    return playwright_expect(actual, message)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """The system's Chromium (no browser download), one for the console tests of a worker.

    Package-scoped, not session-scoped: while Playwright's sync API is active it holds a
    running event loop on the thread, so an ``asyncio.run`` in a later test of the same worker
    would fail. pytest tears a package fixture down before the first test outside
    tests/console, so the loop is gone before any other test runs, and the console tests
    (which call no ``asyncio.run``) share one browser; each still gets its own context
    (cookies, storage) from ``_new_console``. Launching Chromium per test cost ~1 s each.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


@dataclass
class Console:
    """A browser tab on the live collector, with what the page complained about."""

    page: Page
    url: str
    errors: list[str] = field(default_factory=list)

    def open(self, route: str = "") -> Page:
        """Load the console (``route`` is a hash route such as ``#/requests``)."""
        self.page.goto(f"{self.url}/{route}")
        return self.page

    def sign_in(self, key: str = DEFAULT_KEY, route: str = "") -> Page:
        """Load the console and sign in with ``key`` through the form."""
        page = self.open(route)
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Use this key").click()
        # Signed in or refused, the form says so once the key check has answered: a test's
        # next step then reads the page the check led to, not the form.
        expect(page.get_by_text("Checking the key…")).to_have_count(0)
        return page

    def screenshot(self, name: str, *, for_docs: bool = True) -> None:
        """Write <name>.png of the whole page under ``SCREENSHOTS``.

        ``for_docs=False`` is a picture for a reviewer only (every page at every width, light
        and dark): it always goes under build/screenshots, never into docs/screenshots.
        """
        folder = SCREENSHOTS if for_docs else REVIEW_SCREENSHOTS
        folder.mkdir(parents=True, exist_ok=True)
        self.page.mouse.move(0, 0)  # no row left highlighted by the pointer
        self.page.screenshot(path=folder / f"{name}.png", full_page=True)


def _new_console(browser: Browser, url: str, **context: Any) -> Iterator[Console]:
    page_context = browser.new_context(viewport=LAPTOP, **context)
    page = page_context.new_page()
    console = Console(page, url)

    def on_message(message: ConsoleMessage) -> None:
        if message.type == "error":
            console.errors.append(message.text)

    page.on("console", on_message)
    page.on("pageerror", lambda error: console.errors.append(f"uncaught: {error}"))
    yield console
    page_context.close()


@pytest.fixture
def console_url(settings: Settings, openai_stub: OpenAIStub) -> Iterator[str]:
    """A collector on a real socket, its own database, its OpenAI runs going to the stub."""
    run_settings = settings.model_copy(
        update={"openai_base_url": f"{openai_stub.url}/v1", "openai_api_key": SecretStr("sk-stub")}
    )
    with serve(create_app(run_settings)) as url:
        yield url


@pytest.fixture
def console(browser: Browser, console_url: str) -> Iterator[Console]:
    """A fresh tab (its own session storage) on the collector of ``console_url``."""
    yield from _new_console(browser, console_url)


@pytest.fixture
def client(console_url: str) -> Iterator[httpx.Client]:
    """The public API of the console's collector, as project default."""
    # A batch is answered once stored; on a loaded 2-core machine that took over httpx's 5 s.
    with httpx.Client(
        base_url=console_url, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}, timeout=30
    ) as client:
        yield client


@pytest.fixture
def log(client: httpx.Client) -> Any:
    """Log records through ``POST /v1/requests/batch``, as a client application does."""

    def log_records(*records: dict[str, Any]) -> None:
        response = client.post("/v1/requests/batch", json={"records": list(records)})
        assert response.status_code == 201, response.text
        assert response.json()["data"]["rejected"] == []

    return log_records


# Accounts: a collector whose first instance admin comes from the environment, and its people.
ADMIN_EMAIL = "ada@example.com"
ADMIN_PASSWORD = "correct horse battery staple"
PASSWORD = "a long enough password"


def team_settings(settings: Settings) -> Settings:
    """``settings`` whose collector makes the instance admin ADMIN_EMAIL at start-up (the
    owner of project default)."""
    return settings.model_copy(
        update={"init_admin_email": ADMIN_EMAIL, "init_admin_password": SecretStr(ADMIN_PASSWORD)}
    )


def signed_in(url: str, email: str = ADMIN_EMAIL, password: str = PASSWORD) -> httpx.Client:
    """An HTTP client signed in as ``email`` (a cookie), its writes carrying the CSRF token."""
    client = httpx.Client(base_url=url, timeout=30)
    response = client.post("/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["data"]["csrf_token"]
    return client


@pytest.fixture
def team_url(settings: Settings) -> Iterator[str]:
    """A collector whose instance admin ADMIN_EMAIL owns project default."""
    with serve(create_app(team_settings(settings))) as url:
        yield url


@pytest.fixture
def admin(team_url: str) -> Iterator[httpx.Client]:
    """The instance admin of ``team_url``'s collector, signed in over HTTP."""
    client = signed_in(team_url, ADMIN_EMAIL, ADMIN_PASSWORD)
    yield client
    client.close()


@pytest.fixture
def tab(browser: Browser, team_url: str) -> Iterator[Console]:
    """A fresh browser tab on ``team_url``'s collector."""
    yield from _new_console(browser, team_url)
