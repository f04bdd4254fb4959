"""The settings pages of a project's admins, in Chromium against a live collector with
accounts: members and roles (the owner rules as the collector applies them), API keys with
scopes (the key shown once, and doing only what its scopes allow), protected labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import PHONE, Console, expect
from .records import record
from .steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    add_person,
    fits,
    new_tab,
    password_sign_in,
    post,
    settled,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def members(admin: httpx.Client) -> dict[str, str]:
    """The project default's members and roles, as the API lists them."""
    response = admin.get("/v1/projects/default/members")
    assert response.status_code == 200, response.text
    return {member["email"]: member["role"] for member in response.json()["data"]}


def test_an_owner_adds_a_member_changes_its_role_and_removes_it(
    tab: Console, admin: httpx.Client
) -> None:
    post(admin, "/v1/users/accounts", {"email": "bob@example.com", "password": "x" * 16})
    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/requests")
    page.get_by_role("link", name="Settings").click()
    table = page.get_by_role("table", name="Members")
    expect(table).to_contain_text(ADMIN_EMAIL)

    form = page.get_by_role("form", name="Add a member")
    form.get_by_label("E-mail").fill("bob@example.com")
    form.get_by_label("Role").select_option("viewer")
    form.get_by_role("button", name="Add").click()
    expect(page.get_by_text("bob@example.com is now viewer.")).to_be_visible()
    assert members(admin)["bob@example.com"] == "viewer"

    page.get_by_label("bob@example.com", exact=True).select_option("member")
    expect(page.get_by_text("bob@example.com is now member.")).to_be_visible()
    assert members(admin)["bob@example.com"] == "member"
    tab.screenshot("settings-members", for_docs=False)

    page.get_by_role("button", name="Remove bob@example.com").click()
    expect(page.get_by_text("bob@example.com was removed.")).to_be_visible()
    assert "bob@example.com" not in members(admin)

    # An unknown address: the collector's answer, as it gives it.
    form = page.get_by_role("form", name="Add a member")
    form.get_by_label("E-mail").fill("nobody@example.com")
    form.get_by_role("button", name="Add").click()
    expect(page.get_by_role("alert")).to_contain_text("USER_NOT_FOUND")


def test_an_admin_who_is_no_owner_is_offered_no_owner_or_admin_change(
    tab: Console, admin: httpx.Client
) -> None:
    add_person(admin, "cy@example.com", "admin")
    add_person(admin, "dee@example.com", "viewer")
    page = password_sign_in(tab, "cy@example.com", route="#/settings/members")
    table = page.get_by_role("table", name="Members")
    expect(table).to_contain_text("dee@example.com")
    # The owner's row and cy's own (an admin) are text: only an owner changes them.
    expect(page.get_by_role("combobox", name=ADMIN_EMAIL)).to_have_count(0)
    expect(page.get_by_role("button", name=f"Remove {ADMIN_EMAIL}")).to_have_count(0)
    expect(page.get_by_role("combobox", name="cy@example.com")).to_have_count(0)
    options = page.get_by_label("dee@example.com", exact=True).locator("option").all_inner_texts()
    assert options == ["member", "viewer", "annotator"]
    expect(page.get_by_text("Only an owner gives, changes or takes")).to_be_visible()


def test_a_new_key_has_ingest_and_prompts_read_is_shown_once_and_does_only_that(
    tab: Console, team_url: str
) -> None:
    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/settings/keys")
    form = page.get_by_role("form", name="Make a key")
    checked = {
        scope: form.get_by_role("checkbox", name=scope, exact=False).first.is_checked()
        for scope in ("ingest", "prompts:read")
    }
    assert checked == {"ingest": True, "prompts:read": True}
    for scope in ("read", "write", "admin"):
        assert not page.locator(f"#scope-{scope}").is_checked()
    expect(form).to_contain_text("Log records, OTLP spans, scores")
    form.get_by_label("Name (optional)").fill("checkout")
    form.get_by_label("Expires in (optional)").fill("90d")
    form.get_by_role("button", name="Make key").click()
    secret = page.locator(".new-key code.secret")
    expect(secret).to_be_visible()
    key = secret.inner_text().strip()
    expect(page.locator(".new-key")).to_contain_text("shown this once")
    page.locator(".new-key").get_by_role("button", name="Copy").click()
    expect(page.locator(".new-key").get_by_role("status").last).not_to_be_empty()
    keys = page.get_by_role("table", name="API keys")
    row = keys.locator("tr", has_text="checkout")
    expect(row).to_contain_text("ingest")
    expect(row).to_contain_text("prompts:read")
    expect(row).to_contain_text(ADMIN_EMAIL)
    expect(row).to_contain_text("never")  # not used yet
    expect(keys).not_to_contain_text(key)
    tab.screenshot("settings-keys", for_docs=False)

    with httpx.Client(
        base_url=team_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as application:
        logged = application.post("/v1/requests/batch", json={"records": [record(1)]})
        assert logged.status_code == 201, logged.text
        refused = application.get("/v1/requests")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    # Shown once: the page drawn again lists the key without it.
    page.reload()
    expect(page.get_by_role("table", name="API keys")).to_contain_text("checkout")
    expect(page.locator("code.secret")).to_have_count(0)


def test_an_admin_edits_the_protected_labels(tab: Console, admin: httpx.Client) -> None:
    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/settings/labels")
    expect(page.get_by_text("No label is protected.")).to_be_visible()
    form = page.get_by_role("form", name="Protect a label")
    for label in ("production", "staging"):
        form.get_by_label("Label").fill(label)
        form.get_by_role("button", name="Add").click()
    page.get_by_role("button", name="Unprotect staging").click()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    response = admin.get("/v1/projects/default/protected-labels")
    assert response.json()["data"]["labels"] == ["production"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", ["laptop", "phone"])
def test_the_settings_pages_fit_laptop_and_phone_in_light_and_dark(
    browser: Browser, team_url: str, admin: httpx.Client, scheme: str, width: str
) -> None:
    add_person(admin, "a-rather-long-address-of-someone@example.com", "annotator")
    for tab in new_tab(browser, team_url, color_scheme=scheme):
        if width == "phone":
            tab.page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
        password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/requests")
        for name in ("members", "keys", "labels", "audit"):
            page = settled(tab.open(f"#/settings/{name}"))
            expect(page.get_by_role("heading", name="Settings")).to_be_visible()
            settled(page)
            assert fits(page), name
            tab.screenshot(f"settings-{name}-{width}-{scheme}", for_docs=False)


def test_the_audit_log_shows_who_changed_what_with_before_and_after(
    tab: Console, admin: httpx.Client
) -> None:
    post(admin, "/v1/users/accounts", {"email": "bob@example.com", "password": "x" * 16})
    for role in ("viewer", "member"):
        response = admin.put("/v1/projects/default/members/bob@example.com", json={"role": role})
        assert response.status_code == 200, response.text
    response = admin.put("/v1/projects/default/protected-labels", json={"labels": ["production"]})
    assert response.status_code == 200, response.text

    page = password_sign_in(tab, ADMIN_EMAIL, ADMIN_PASSWORD, route="#/settings/audit")
    entries = page.get_by_role("list", name="Audit log").locator("li.audit-entry")
    expect(entries.first).to_be_visible()
    newest = entries.first
    expect(newest).to_contain_text("protected")
    expect(newest).to_contain_text(ADMIN_EMAIL)
    # The role change from viewer to member: its before and after, side by side.
    change = entries.filter(has_text="bob@example.com").first
    change.locator("summary").click()
    diff = change.locator("table.diff")
    expect(diff.locator("td.left")).to_contain_text(["viewer"])
    expect(diff.locator("td.right")).to_contain_text(["member"])
    tab.screenshot("settings-audit", for_docs=False)

    # The actor's link filters by the actor; the address keeps the filter.
    newest.get_by_role("link", name=ADMIN_EMAIL).click()
    assert "actor=" in page.url
    expect(page.get_by_label("Actor id")).not_to_have_value("")
    settled(page)
    expect(entries.first).to_contain_text(ADMIN_EMAIL)
