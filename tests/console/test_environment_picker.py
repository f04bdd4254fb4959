"""The environment picker (issue 47 point 1): every list (requests, traces, sessions, users,
analytics, the review queue) picks environments from the project's, remembered in the address;
by default the lists hide the service's own (an experiment's runs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .conftest import PHONE, Console, expect
from .records import record
from .steps import rows

if TYPE_CHECKING:
    from playwright.sync_api import Page

Log = Callable[..., None]

# The session and user lists cover the last 30 days by default: records are logged as of now.
NOW = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)


def logged(number: int, environment: str | None, trace: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "created_at": (NOW + timedelta(minutes=number)).isoformat(),
        "trace_id": trace,
        "span_id": f"{number:016x}",
        "span_name": f"turn {number}",
        "metadata": {"session_id": f"s-{number}", "user_id": f"u-{number}"},
    }
    if environment is not None:
        fields["environment"] = environment
    return record(number, **fields)


def pick(page: Page, environment: str) -> None:
    """Choose ``environment`` in the page's picker (once the project's names arrived), apply."""
    picker = page.get_by_label("Environment")
    expect(picker.locator(f"option[value='{environment}']")).to_be_attached()
    picker.select_option(environment)
    page.get_by_role("button", name="Apply").click()


def test_every_list_picks_an_environment_and_the_address_remembers_it(
    console: Console, log: Log
) -> None:
    log(logged(1, None, "1" * 32), logged(2, "staging", "2" * 32))
    page = console.sign_in()
    assert len(rows(page)) == 2
    pick(page, "staging")
    expect(page).to_have_url(re.compile(r"#/requests\?environment=staging$"))
    staged = (NOW + timedelta(minutes=2)).strftime("%Y-%m-%d %H:%M:%S")
    assert [r[0] for r in rows(page)] == [staged]
    # The address is the filter: reloading keeps it, picked.
    page.reload()
    expect(page.get_by_label("Environment")).to_have_value("staging")
    assert len(rows(page)) == 1

    for route, shown in (
        ("#/traces", "turn 2"),
        ("#/sessions", "s-2"),
        ("#/users", "u-2"),
    ):
        console.open(f"{route}?environment=staging")
        expect(page.get_by_label("Environment")).to_have_value("staging")
        listed = rows(page)
        assert len(listed) == 1 and shown in " ".join(listed[0]), (route, listed)
        console.open(f"{route}?environment=production")
        assert len(rows(page)) == 1 and shown not in " ".join(rows(page)[0]), route

    console.open("#/analytics?environment=staging")
    expect(page.get_by_label("Environment")).to_have_value("staging")
    console.open("#/review?name=thumbs&environment=staging")
    expect(page.get_by_label("Environment")).to_have_value("staging")
    expect(page.locator("p.summary")).to_have_text("Record 1 of 1 (1 to score).")
    assert console.errors == []


def test_the_picker_fits_a_phone(console: Console, log: Log) -> None:
    log(logged(1, "staging", "3" * 32))
    console.page.set_viewport_size(PHONE)
    page = console.sign_in()
    picker = page.get_by_label("Environment")
    expect(picker.locator("option[value='staging']")).to_be_attached()
    box = picker.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]


def test_search_picks_an_environment_and_the_address_remembers_it(
    console: Console, log: Log
) -> None:
    log(
        logged(1, None, "4" * 32) | {"output": "needle in production"},
        logged(2, "staging", "5" * 32) | {"output": "needle in staging"},
    )
    page = console.sign_in()
    hits = page.locator("li.hit")
    page.get_by_label("Search text").fill("needle")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(hits).to_have_count(2)
    pick(page, "staging")
    expect(page).to_have_url(re.compile(r"#/requests\?q=needle&environment=staging$"))
    expect(hits).to_have_count(1)
    expect(hits.locator("dd")).to_have_text("needle in staging")
    # The address is the search: reloading keeps it, picked; a hit's page leads back to it.
    page.reload()
    expect(page.get_by_label("Environment")).to_have_value("staging")
    expect(hits).to_have_count(1)
    hits.get_by_role("link").click()
    page.get_by_role("link", name="← Requests").click()
    expect(page.get_by_label("Environment")).to_have_value("staging")
    expect(hits).to_have_count(1)
    # Searching again, or from a list filtered by environment, keeps it; Clear drops it.
    page.get_by_label("Search text").fill("production")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page).to_have_url(re.compile(r"#/requests\?q=production&environment=staging$"))
    expect(page.get_by_role("status")).to_have_text("No requests contain “production”.")
    console.open("#/requests?environment=production")
    page.get_by_label("Search text").fill("needle")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page).to_have_url(re.compile(r"#/requests\?q=needle&environment=production$"))
    expect(hits.locator("dd")).to_have_text("needle in production")
    page.get_by_role("link", name="Clear").click()
    expect(page.get_by_label("Environment")).to_have_value("")
    expect(hits).to_have_count(2)
    assert console.errors == []
