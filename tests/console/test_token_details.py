"""The record detail shows cached, cache-write and reasoning tokens when the call had them
(issue 35 point 4), and leaves them out when it had none."""

from __future__ import annotations

from typing import Any

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record
from .steps import pairs


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
    # On a phone the longest label ("Cached prompt tokens (cache read)") wraps inside its
    # card: nothing scrolls sideways; and the dark scheme shows the same rows.
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert pairs(page, "Usage and cost")["Cached prompt tokens (cache read)"] == "3,000"
    # The long label wraps, not the values: the cost stays on one line, as short ones do.
    card = page.locator("section", has=page.get_by_role("heading", name="Usage and cost"))
    heights = [
        card.get_by_text(label, exact=True).locator("xpath=following-sibling::dd[1]").bounding_box()
        for label in ("Prompt tokens", "Estimated cost")
    ]
    assert heights[0] and heights[1] and heights[1]["height"] == heights[0]["height"]
    console.screenshot("request-detail-token-details-phone")
    page.set_viewport_size(LAPTOP)
    page.emulate_media(color_scheme="dark")
    console.screenshot("request-detail-token-details-dark")
    page.emulate_media(color_scheme="light")

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
