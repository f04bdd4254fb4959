"""Analytics: the four metrics over a chosen period, by day and by group, totals beside."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .conftest import Console
from .records import GALLERY

PERIOD = "#/analytics?start_date=2026-11-20&end_date=2026-11-24"


def totals(page: Page) -> dict[str, str]:
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    cards = page.locator("section.metric")
    return dict(
        zip(
            cards.locator("h2").all_inner_texts(),
            cards.locator(".total").all_inner_texts(),
            strict=True,
        )
    )


def test_totals_and_daily_columns_for_the_chosen_period(
    console: Console, log: Callable[..., None]
) -> None:
    log(*GALLERY)

    page = console.sign_in(route=PERIOD)

    assert totals(page) == {
        "Cost": "$0.006319",
        "Tokens": "4,897 tokens",
        "Latency (p50 / p95)": "mean 7,075 ms",
        "Errors": "1 error",
    }
    expect(page.get_by_role("status")).to_have_text(
        "2026-11-20 00:00:00 → 2026-11-24 23:59:59 (UTC), grouped by day."
    )
    cost = page.locator("section.metric-cost g.column")
    expect(cost).to_have_count(5)  # one column a day, the empty 11-21 included
    assert cost.locator("title").all_text_contents() == [
        "2026-11-20: $0.00249 (1 requests)",
        "2026-11-21: $0 (0 requests)",
        "2026-11-22: $0.000039 (1 requests)",
        "2026-11-23: $0.00109 (1 requests)",
        "2026-11-24: $0.0027 (2 requests)",
    ]
    heights = cost.locator("rect").evaluate_all(
        "rects => rects.map(r => +r.getAttribute('height'))"
    )
    assert heights[1] == 0 and max(heights) == heights[4]
    # The latency legend's keys are the colours of its columns: p95 holding p50.
    keys = page.locator("section.metric-latency .legend .key")
    assert keys.all_text_contents() == ["p95", "p50"]
    swatches = keys.evaluate_all(
        "keys => keys.map(k => getComputedStyle(k, '::before').backgroundColor)"
    )
    fills = [
        page.locator(f"section.metric-latency g.column rect{kind}").first.evaluate(
            "r => getComputedStyle(r).fill"
        )
        for kind in (":not(.inner)", ".inner")
    ]
    assert swatches == fills and fills[0] != fills[1]
    console.screenshot("analytics")


def test_grouping_by_model_and_filtering_by_prompt(
    console: Console, log: Callable[..., None]
) -> None:
    log(*GALLERY)
    page = console.sign_in(route=PERIOD)
    totals(page)

    page.get_by_label("Group by").select_option("model")
    page.get_by_role("button", name="Apply").click()
    totals(page)
    bars = page.locator("section.metric-usage .bar-row")
    assert bars.evaluate_all("rows => rows.map(r => r.innerText.replace(/\\s+/g, ' ').trim())") == [
        "claude-3-5-haiku 4,220",
        "gpt-4o 417",
        "gpt-4o-mini 260",
    ]
    latency = page.locator("section.metric-latency .bar-row").first
    expect(latency).to_contain_text("claude-3-5-haiku")
    expect(page.locator("section.metric-latency .legend .key")).to_have_text(["p95"])

    page.get_by_label("Prompt").fill("summarize-ticket")
    page.get_by_role("button", name="Apply").click()

    assert totals(page)["Errors"] == "1 error"
    assert totals(page)["Tokens"] == "4,220 tokens"
    expect(page.locator("section.metric-cost .bar-row")).to_have_count(1)
