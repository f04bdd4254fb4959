"""Settings, Connections in Chromium against a live collector: add a connection (its key never
shown again, on the page or in the API's answers), check it against the provider stub (status
and latency), set its budget, delete it; laptop and phone, light and dark."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from promptrail.testing import OpenAIStub

from .conftest import PHONE, Console, expect
from .steps import fits, settled

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

SECRET = "sk-test-very-secret-key-9f3a"


@pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(None, "light"), (None, "dark"), (PHONE, "light"), (PHONE, "dark")],
    ids=["laptop-light", "laptop-dark", "phone-light", "phone-dark"],
)
def test_an_admin_adds_checks_budgets_and_deletes_a_connection_and_never_sees_its_key(
    console: Console,
    client: httpx.Client,
    openai_stub: OpenAIStub,
    viewport: dict[str, int] | None,
    scheme: str,
) -> None:
    page = console.page
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    if viewport:
        page.set_viewport_size(viewport)
    console.sign_in(route="#/settings/connections")
    settled(page)
    expect(page.get_by_text("No connection: the server's own keys are used.")).to_be_visible()

    form = page.get_by_role("form", name="Add a connection")
    form.get_by_label("Name", exact=True).fill("team")
    form.get_by_label("Provider").select_option("openai_compatible")
    form.get_by_label("API key").fill(SECRET)
    form.get_by_label("Base URL (optional)").fill(f"{openai_stub.url}/v1")
    form.get_by_label("Models (optional)").fill("gpt-4o-mini")
    form.get_by_label("Monthly budget, USD (optional)").fill("5")
    form.get_by_role("button", name="Add connection").click()
    expect(page.get_by_text("team was added.")).to_be_visible()

    table = page.get_by_role("table", name="Connections")
    expect(table).to_contain_text("openai_compatible")
    expect(table).to_contain_text(f"…{SECRET[-4:]}")
    expect(table).to_contain_text("never")
    # The key is nowhere on the page, not even in the emptied form's field.
    assert SECRET not in page.content()
    assert form.get_by_label("API key").input_value() == ""
    assert SECRET not in client.get("/v1/connections").text

    page.get_by_role("button", name="Check team").click()
    result = page.locator(".check-result")
    expect(result).to_contain_text("ok")
    expect(result).to_contain_text("ms")

    budget = page.get_by_label("Monthly budget of team (USD)")
    budget.fill("12.5")
    page.get_by_role("form", name="Budget of team").get_by_role("button", name="Save").click()
    expect(page.get_by_text("team's budget is $12.50 a month.")).to_be_visible()
    assert client.get("/v1/connections/team").json()["data"]["monthly_budget_usd"] == 12.5
    assert fits(page)
    console.screenshot(f"connections-{'phone' if viewport else 'laptop'}-{scheme}", for_docs=False)

    def accept(dialog: Dialog) -> None:
        dialog.accept()

    page.once("dialog", accept)
    page.get_by_role("button", name="Delete team").click()
    expect(page.get_by_text("team was deleted.")).to_be_visible()
    expect(page.get_by_text("No connection: the server's own keys are used.")).to_be_visible()
    assert client.get("/v1/connections").json()["data"] == []
    assert console.errors == []
