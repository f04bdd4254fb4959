"""Analytics: the four metrics over a chosen period, by day and by group, totals beside."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from .conftest import LAPTOP, PHONE, Console, expect
from .records import GALLERY, record

if TYPE_CHECKING:
    from playwright.sync_api import Page

PERIOD = "#/analytics?start_date=2026-11-20&end_date=2026-11-24"


def totals(page: Page) -> dict[str, str]:
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    cards = page.locator("section.metric")
    # The cards arrive after the page's first element (which ends aria-busy): wait for them.
    expect(cards).not_to_have_count(0)
    expect(cards.locator(".total")).to_have_count(cards.count())
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


def hours_ago(hours: float) -> str:
    moment = datetime.now(UTC) - timedelta(hours=hours)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def chart_labels(page: Page, metric: str) -> list[str]:
    """The axis labels under a time chart's columns, each as "line" or "line / date"."""
    columns = page.locator(f"section.metric-{metric} g.column")
    texts = columns.evaluate_all(
        "gs => gs.map(g => [...g.querySelectorAll('text')].map(t => t.textContent).join(' / '))"
    )
    return [text for text in texts if text]


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_quick_ranges_pick_a_bucket_that_fits_and_labels_carry_dates(
    console: Console, log: Callable[..., None], viewport: dict[str, int]
) -> None:
    log(
        record(1, created_at=hours_ago(2), latency_ms=48_200),
        record(2, created_at=hours_ago(5)),
        record(3, created_at=hours_ago(24 * 5)),
    )
    page = console.sign_in(route="#/analytics")
    page.set_viewport_size(viewport)
    totals(page)

    ranges = page.get_by_role("navigation", name="Quick ranges")
    ranges.get_by_role("link", name="Last 24 h").click()
    # The new page first (its link marked current), then its totals: read before, they were the
    # previous page's cards, replaced between reading their titles and their totals.
    expect(ranges.get_by_role("link", name="Last 24 h")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("status")).to_contain_text("grouped by hour")
    assert totals(page)["Tokens"] == "246 tokens"
    columns = page.locator("section.metric-usage g.column")
    assert 24 <= columns.count() <= 25  # one an hour, not 720 hairlines
    labels = chart_labels(page, "usage")
    # The first label names its day; so does the first of each new day.
    days = {text.split(" / ")[1] for text in labels if " / " in text}
    assert labels[0].count(" / ") == 1
    assert days == {hours_ago(24)[5:10], hours_ago(0)[5:10]} - {""}
    # The first label is inside the chart, not cut at its left edge; nor is any scale label.
    chart = page.locator("section.metric-usage svg.chart")
    first = chart.locator("g.column text").first
    assert first.bounding_box()["x"] >= chart.bounding_box()["x"]  # type: ignore[index]
    for metric in ("cost", "usage", "latency", "errors"):
        cut = page.locator(f"section.metric-{metric} svg.chart").evaluate(
            """svg => [...svg.querySelectorAll("text")].filter(text =>
                text.getBoundingClientRect().left < svg.getBoundingClientRect().left
                || text.getBoundingClientRect().right > svg.getBoundingClientRect().right
            ).map(text => text.textContent)"""
        )
        assert cut == [], metric
        # Nor does an axis label run into a scale label.
        overlaps = page.locator(f"section.metric-{metric} svg.chart").evaluate(
            """svg => {
                const boxes = (q) =>
                    [...svg.querySelectorAll(q)].map(t => t.getBoundingClientRect());
                const meet = (a, b) => a.left < b.right && b.left < a.right
                    && a.top < b.bottom && b.top < a.bottom;
                const scale = boxes("g.scale text");
                return boxes("g.column text").filter(a => scale.some(b => meet(a, b))).length;
            }"""
        )
        assert overlaps == 0, metric
    # A value scale: 0, a middle and a top line, labelled in the metric's unit.
    scale = chart.locator("g.scale text").all_text_contents()
    assert scale[0] == "0" and len(scale) == 3
    assert page.locator("section.metric-cost g.scale text").all_text_contents()[0] == "$0"
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    console.screenshot("analytics-24h" if viewport is LAPTOP else "analytics-24h-phone")

    ranges.get_by_role("link", name="Last 7 days").click()
    expect(ranges.get_by_role("link", name="Last 7 days")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("status")).to_contain_text("grouped by day")
    assert totals(page)["Tokens"] == "369 tokens"
    assert 7 <= columns.count() <= 8

    ranges.get_by_role("link", name="Last 30 days").click()
    expect(ranges.get_by_role("link", name="Last 30 days")).to_have_attribute(
        "aria-current", "page"
    )
    totals(page)
    expect(page.get_by_role("status")).to_contain_text("grouped by day")
    assert 30 <= columns.count() <= 31
