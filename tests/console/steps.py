"""Steps and readings the console's browser tests share: what a user does (filter, open a run
panel) and reads (a table's rows, a detail's facts), and the API calls that set a page up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx

from .conftest import ADMIN_EMAIL as ADMIN_EMAIL
from .conftest import ADMIN_PASSWORD as ADMIN_PASSWORD
from .conftest import LAPTOP, PASSWORD, PHONE, Console, _new_console, expect
from .conftest import signed_in as signed_in
from .conftest import team_settings as team_settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page


def post(client: httpx.Client, path: str, body: dict[str, Any], status: int = 201) -> Any:
    """POST ``body`` to the API, check the status, answer the response's ``data``."""
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()["data"]


def settled(page: Page) -> Page:
    """``page`` once its route has drawn (the main view no longer busy)."""
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    return page


def fits(page: Page) -> bool:
    """Whether the page is no wider than the screen (nothing to scroll sideways)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def both_looks(console: Console, page: Page, name: str) -> None:
    """Screenshots of the page at laptop and phone width, light and dark (``name``-width-
    scheme); the page must not scroll sideways on a phone."""
    for width, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            console.screenshot(f"{name}-{width}-{scheme}", for_docs=False)
        if width == "phone":
            assert fits(page), f"{name} scrolls sideways on a phone"
    page.set_viewport_size(LAPTOP)
    page.emulate_media(color_scheme="light")


def rows(page: Page) -> list[list[str]]:
    """The table's rows as the user reads them, cell by cell."""
    expect(page.locator("table.records")).to_be_attached()
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    cells = page.locator("table.records tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))"
    )
    return list(cells)


def card(page: Page, title: str) -> Locator:
    """The detail's section headed ``title``."""
    heading = page.get_by_role("heading", name=title, exact=True)
    return page.locator("section.card", has=heading)


def pairs(page: Page, title: str) -> dict[str, str]:
    """A detail section's name/value pairs (a list of facts or a key/value table)."""
    found = card(page, title).evaluate(
        """section => Object.fromEntries(
            [...section.querySelectorAll("dt, table.kv th")].map(name => [
                name.innerText.trim(),
                (name.nextElementSibling?.innerText ?? "").trim(),
            ]))"""
    )
    return dict(found)


def filter_by(page: Page, **values: str) -> None:
    """Fill the filter form as a user would and apply it."""
    labels = {
        "prompt": "Prompt",
        "from_date": "From",
        "to_date": "To",
        "key": "Metadata key",
        "value": "Metadata value",
    }
    for name, label in labels.items():
        page.get_by_label(label, exact=True).fill(values.get(name, ""))
    page.get_by_label("Status").select_option(values.get("status", ""))
    page.get_by_role("button", name="Apply").click()


def create(client: httpx.Client, name: str, template: str, **fields: Any) -> None:
    """Create prompt ``name`` (model gpt-4o-mini unless ``fields`` say otherwise)."""
    body = {"name": name, "template": template, "model": "gpt-4o-mini", **fields}
    response = client.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text


def run_panel(
    console: Console, client: httpx.Client, template: str, **fields: Any
) -> tuple[Page, Locator]:
    """Create prompt "greeting" with ``template`` and open its page's run panel."""
    create(client, "greeting", template, **fields)
    page = console.sign_in(route="#/prompts/greeting")
    return page, page.get_by_role("form", name="Run this prompt")


# Accounts: people of a collector whose first instance admin comes from the environment
# (its settings, the admin and the fixtures on it are in conftest.py).


def add_person(admin: httpx.Client, email: str, role: str, project: str = "default") -> None:
    """Make the user ``email`` (password PASSWORD) as the instance admin and give it ``role``."""
    post(admin, "/v1/users/accounts", {"email": email, "password": PASSWORD})
    response = admin.put(f"/v1/projects/{project}/members/{email}", json={"role": role})
    assert response.status_code == 200, response.text


def password_sign_in(
    console: Console, email: str, password: str = PASSWORD, route: str = ""
) -> Page:
    """Load the console and sign in with e-mail and password through the form."""
    page = console.open(route)
    form = page.get_by_role("form", name="Sign in with an account")
    form.get_by_label("E-mail").fill(email)
    form.get_by_label("Password").fill(password)
    form.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    return settled(page)


def new_tab(browser: Browser, url: str, **context: Any) -> Iterator[Console]:
    """A fresh tab (cookies and storage of its own) on the collector at ``url``."""
    yield from _new_console(browser, url, **context)
