"""The record detail shows cached, cache-write and reasoning tokens when the call had them
(issue 35 point 4), and leaves them out when it had none."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from .conftest import Console
from .records import record
from .test_requests_page import pairs


def test_the_detail_shows_the_token_details_only_when_non_zero(console: Console, log: Any) -> None:
    usage = {
        "prompt_tokens": 5000,
        "completion_tokens": 700,
        "cached_tokens": 3000,
        "cache_write_tokens": 1200,
        "reasoning_tokens": 512,
        "estimated_cost_usd": 0.0123,
    }
    log(record(1, usage=usage), record(2))

    page = console.sign_in(route="#/requests/req_console_0001")
    expect(page.get_by_role("heading", name="Usage and cost")).to_be_visible()
    assert pairs(page, "Usage and cost") == {
        "Prompt tokens": "5,000",
        "Completion tokens": "700",
        "Cached prompt tokens (cache read)": "3,000",
        "Cache-write tokens": "1,200",
        "Reasoning tokens": "512",
        "Total tokens": "5,700",
        "Estimated cost": "$0.0123",
    }
    console.screenshot("request-detail-token-details")

    page.goto(page.url.replace("req_console_0001", "req_console_0002"))
    # The first record's detail goes; the second one's comes, without the details.
    expect(page.locator("dt", has_text="Reasoning tokens")).to_have_count(0)
    expect(page.get_by_text("Prompt tokens", exact=True)).to_be_visible()
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    assert pairs(page, "Usage and cost") == {
        "Prompt tokens": "100",
        "Completion tokens": "23",
        "Total tokens": "123",
        "Estimated cost": "$0.0012",
    }
