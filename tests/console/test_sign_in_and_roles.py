"""Signing in to the console (e-mail and password, the session cookie, sign-out, a session
ended elsewhere), the project switcher, and controls hidden from a role that may not use them
(docs/security.md, "Roles and scopes"), in Chromium against a live collector with accounts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import serve
from tests.collector.accounts.oidc_provider import CLIENT_ID, CLIENT_SECRET
from tests.collector.accounts.oidc_steps import running_provider
from tests.keys import DEFAULT_KEY

from .conftest import PHONE, Console, expect
from .records import record
from .steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    add_person,
    create,
    new_tab,
    password_sign_in,
    post,
    settled,
    team_settings,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture
def app_key(team_url: str) -> Iterator[httpx.Client]:
    """An application of project default, with the development key."""
    with httpx.Client(
        base_url=team_url, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}, timeout=30
    ) as client:
        yield client


def log(client: httpx.Client, *records: dict[str, Any]) -> None:
    """Log ``records`` as an application does."""
    data = post(client, "/v1/requests/batch", {"records": list(records)})
    assert data["rejected"] == []


def nav(page: Page) -> list[str]:
    """The sections the header offers."""
    expect(page.locator("#nav a").first).to_be_visible()
    return [text.strip() for text in page.locator("#nav a").all_inner_texts()]


def test_the_console_opens_on_sign_in_and_a_password_signs_in_until_sign_out(
    tab: Console, app_key: httpx.Client
) -> None:
    log(app_key, record(1, model="model-of-default"))
    page = tab.open("#/requests")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_label("E-mail")).to_be_focused()
    # The single-user default's key entry stays; no SSO button on a collector without SSO.
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.get_by_role("link", name="Sign in with SSO")).to_have_count(0)
    # Opening asked the API nothing it refuses (no 401 from /v1/auth/me, no 404 from SSO).
    assert tab.errors == []
    tab.screenshot("sign-in", for_docs=False)

    form = page.get_by_role("form", name="Sign in with an account")
    form.get_by_label("E-mail").fill(ADMIN_EMAIL)
    form.get_by_label("Password").fill("not the password at all")
    form.get_by_role("button", name="Sign in").click()
    expect(form.get_by_role("alert")).to_have_text("Wrong e-mail or password.")

    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/requests")
    assert page.url.endswith("#/requests")
    expect(page.locator("table.records")).to_contain_text("model-of-default")
    switcher = page.get_by_label("Project")
    expect(switcher.locator("option:checked")).to_have_text("default · owner")
    expect(page.locator(".account")).to_contain_text(ADMIN_EMAIL)
    # The session is the collector's cookie: a reload stays signed in.
    page.reload()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_role("heading", name="Requests")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text("Signed out.")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_a_session_ended_elsewhere_returns_to_sign_in_and_back_to_the_same_page(
    tab: Console, admin: httpx.Client
) -> None:
    add_person(admin, "bob@example.com", "member")
    page = password_sign_in(tab, "bob@example.com", route="#/prompts")
    # A new password ends every session of the user at once.
    response = admin.patch(
        "/v1/users/accounts/bob@example.com", json={"password": "another long password"}
    )
    assert response.status_code == 200, response.text
    page.get_by_role("link", name="Datasets").click()
    expect(page.get_by_text("Your session has ended.")).to_be_visible()
    assert page.url.endswith("#/datasets")
    page = password_sign_in(tab, "bob@example.com", "another long password", route="#/datasets")
    expect(page.get_by_role("heading", name="Datasets")).to_be_visible()
    assert page.url.endswith("#/datasets")


def test_the_project_switcher_reloads_every_list_for_the_chosen_project(
    tab: Console, admin: httpx.Client, app_key: httpx.Client, team_url: str
) -> None:
    assert post(admin, "/v1/projects", {"name": "shop"})["role"] == "owner"
    shop_key = admin.post(
        "/v1/keys", json={"scopes": ["write"]}, headers={"X-Promptrail-Project": "shop"}
    )
    assert shop_key.status_code == 201, shop_key.text
    with httpx.Client(
        base_url=team_url,
        headers={"Authorization": f"Bearer {shop_key.json()['data']['api_key']}"},
        timeout=30,
    ) as shop:
        log(shop, record(2, model="model-of-shop"))
        create(shop, "shop-greeting", "Hi {{name}}")
    log(app_key, record(1, model="model-of-default"))
    create(app_key, "default-greeting", "Hello {{name}}")

    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/requests")
    expect(page.locator("table.records")).to_contain_text("model-of-default")
    page.get_by_label("Project").select_option("shop")
    expect(page.locator("table.records")).to_contain_text("model-of-shop")
    expect(page.locator("table.records")).not_to_contain_text("model-of-default")
    page.get_by_role("link", name="Prompts").click()
    expect(page.get_by_role("link", name="shop-greeting")).to_be_visible()
    expect(page.get_by_role("link", name="default-greeting")).to_have_count(0)
    # The choice holds for the tab: a reload keeps it.
    page.reload()
    expect(page.get_by_role("link", name="shop-greeting")).to_be_visible()
    page.get_by_label("Project").select_option("default")
    expect(page.get_by_role("link", name="default-greeting")).to_be_visible()
    expect(page.get_by_role("link", name="shop-greeting")).to_have_count(0)


def prompt_with_labels(app_key: httpx.Client) -> None:
    """Prompt greeting (two versions, production on 1, staging on 2) and a record of it."""
    create(app_key, "greeting", "Hello {{name}}", labels=["production"])
    response = app_key.patch(
        "/v1/prompts/greeting", json={"template": "Hi {{name}}", "labels": ["staging"]}
    )
    assert response.status_code in (200, 201), response.text
    log(app_key, record(1, prompt_name="greeting", version=1))


def test_a_viewer_sees_no_write_controls_on_the_prompts_and_requests_pages(
    tab: Console, admin: httpx.Client, app_key: httpx.Client
) -> None:
    prompt_with_labels(app_key)
    add_person(admin, "vera@example.com", "viewer")
    page = password_sign_in(tab, "vera@example.com", route="#/prompts")
    assert "Settings" not in nav(page)
    expect(page.get_by_role("link", name="greeting")).to_be_visible()
    expect(page.get_by_role("link", name="New prompt")).to_have_count(0)

    page.get_by_role("link", name="greeting").click()
    expect(page.get_by_role("heading", name="Labels")).to_be_visible()
    settled(page)
    expect(page.locator("table.labels")).to_contain_text("production")
    for name in ("Edit", "Review records", "Roll back to v1"):
        expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    for name in ("Move production", "Remove production", "Attach", "Run"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(page.get_by_role("heading", name="Run over a dataset")).to_have_count(0)
    tab.screenshot("viewer-prompt", for_docs=False)

    page.get_by_role("link", name="Requests").click()
    settled(page)
    expect(page.locator("table.records")).to_contain_text("greeting")
    expect(page.get_by_role("button", name="Export CSV")).to_have_count(0)
    expect(page.get_by_text("Add these requests to a dataset")).to_have_count(0)
    page.goto(f"{tab.url}/#/requests/req_console_0001")
    expect(page.get_by_role("heading", name="Scores")).to_be_visible()
    settled(page)
    expect(page.get_by_role("button", name="Save score")).to_have_count(0)
    expect(page.get_by_role("button", name="Add to dataset")).to_have_count(0)


def test_a_member_writes_but_sees_no_settings_nor_a_protected_label_s_controls(
    tab: Console, admin: httpx.Client, app_key: httpx.Client
) -> None:
    prompt_with_labels(app_key)
    response = admin.put("/v1/projects/default/protected-labels", json={"labels": ["production"]})
    assert response.status_code == 200, response.text
    add_person(admin, "mo@example.com", "member")
    page = password_sign_in(tab, "mo@example.com", route="#/prompts")
    assert "Settings" not in nav(page)
    expect(page.get_by_role("link", name="New prompt")).to_be_visible()
    page.get_by_role("link", name="greeting").click()
    expect(page.get_by_role("button", name="Move staging", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Edit", exact=True)).to_be_visible()
    # production is protected: only an admin moves it, so the member gets no button for it.
    expect(page.get_by_role("button", name="Move production", exact=True)).to_have_count(0)
    expect(page.locator("table.labels")).to_contain_text("protected: an admin moves it")


def test_an_annotator_scores_records_but_is_offered_no_prompts_or_settings(
    tab: Console, admin: httpx.Client, app_key: httpx.Client
) -> None:
    log(app_key, record(1))
    add_person(admin, "ann@example.com", "annotator")
    page = password_sign_in(tab, "ann@example.com", route="#/requests/req_console_0001")
    sections = nav(page)
    assert "Requests" in sections and "Review" in sections
    assert not {"Prompts", "Experiments", "Settings"} & set(sections)
    expect(page.get_by_role("button", name="Save score")).to_be_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_sign_in_page_and_the_switcher_fit_a_phone(
    browser: Browser, team_url: str, scheme: str
) -> None:
    for tab in new_tab(browser, team_url, color_scheme=scheme):
        tab.page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
        page = tab.open()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        tab.screenshot(f"sign-in-phone-{scheme}", for_docs=False)
        page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/requests")
        expect(page.get_by_label("Project")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        tab.screenshot(f"signed-in-phone-{scheme}", for_docs=False)


def test_sign_in_with_sso_is_offered_when_the_collector_has_a_provider(
    browser: Browser, settings: Settings, tmp_path: Path
) -> None:
    with running_provider(tmp_path / "idp") as idp:
        sso_settings = team_settings(settings).model_copy(
            update={
                "oidc_issuer": idp.issuer,
                "oidc_client_id": CLIENT_ID,
                "oidc_client_secret": SecretStr(CLIENT_SECRET),
            }
        )
        with serve(create_app(sso_settings)) as url:
            for tab in new_tab(browser, url):
                page = tab.open("#/prompts")
                link = page.get_by_role("link", name="Sign in with SSO")
                expect(link).to_have_attribute("href", "/v1/auth/oidc/login")
                # Nothing refused on the way: the page asked the API nothing it would refuse.
                assert tab.errors == []
                tab.screenshot("sign-in-sso", for_docs=False)
                link.click()
                # The collector sent the browser on to the provider.
                page.wait_for_url(f"{idp.url}/**")
