"""A record's trace in its detail: the spans of its trace as a tree, with durations, clickable."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record

if TYPE_CHECKING:
    from playwright.sync_api import Page

Log = Callable[..., None]

TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"


def span(
    number: int, name: str, offset_ms: int, latency_ms: int, parent: int | None, **fields: Any
) -> dict[str, Any]:
    """A span of TRACE starting ``offset_ms`` after 10:00:00, as @observe would log it."""
    seconds, ms = divmod(offset_ms, 1000)
    return record(
        number,
        created_at=f"2026-11-24T10:00:{seconds:02d}.{ms:03d}Z",
        prompt_name="",
        version=None,
        span_name=name,
        trace_id=TRACE,
        span_id=f"{number:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        latency_ms=latency_ms,
        **fields,
    )


SPANS = [
    span(1, "answer_question", 0, 2000, None, model=""),
    span(2, "retrieve", 100, 500, 1, model=""),
    span(3, "embed_query", 150, 200, 2, model="text-embedding-3-small"),
    span(4, "rerank", 400, 150, 2, model="", status="error", error="reranker unavailable"),
    span(5, "chat.completions", 700, 1200, 1),
]


def tree(page: Page) -> list[dict[str, Any]]:
    """The trace's spans in reading order: depth, name, status, duration and bar placement."""
    trace_card = page.locator("section.trace")
    expect(trace_card.locator("li[role=treeitem]")).to_have_count(len(SPANS))
    return list(
        trace_card.evaluate(
            """card => [...card.querySelectorAll("li[role=treeitem]")].map(row => {
                const bar = row.querySelector(".trace-bar");
                const track = row.querySelector(".trace-track").getBoundingClientRect();
                return {
                    depth: Number(row.getAttribute("aria-level")) - 1,
                    name: row.querySelector("a").innerText,
                    model: row.querySelector(".trace-model").innerText,
                    status: row.querySelector(".badge").innerText,
                    duration: row.querySelector(".trace-duration").innerText,
                    left: parseFloat(bar.style.left),
                    width: parseFloat(bar.style.width),
                    track: [track.left, track.width],
                    current: row.classList.contains("current"),
                };
            })"""
        )
    )


def test_a_records_trace_shows_as_a_tree_with_durations_and_each_span_opens(
    console: Console, log: Log
) -> None:
    # Another trace's call and a call outside any trace, logged in between: not in the tree.
    other = record(9, created_at="2026-11-24T10:00:01Z", trace_id="a" * 32, span_id="b" * 16)
    log(*SPANS[:3], other, record(10, created_at="2026-11-24T10:00:00.500Z"), *SPANS[3:])

    page = console.sign_in(route=f"#/requests/{SPANS[4]['id']}")
    expect(page.get_by_role("heading", name="Trace", exact=True)).to_be_visible()
    expect(page.locator("section.trace")).to_contain_text("5 spans over 2,000 ms")
    shown = tree(page)
    assert [(s["depth"], s["name"], s["model"], s["status"], s["duration"]) for s in shown] == [
        (0, "answer_question", "", "success", "2,000 ms"),
        (1, "retrieve", "", "success", "500 ms"),
        (2, "embed_query", "text-embedding-3-small", "success", "200 ms"),
        (2, "rerank", "", "error", "150 ms"),
        (1, "chat.completions", "gpt-4o-mini", "success", "1,200 ms"),
    ]
    # Bars: start offset and duration as shares of the trace's 2 s.
    assert [(s["left"], s["width"]) for s in shown] == [
        (0, 100),
        (5, 25),
        (7.5, 10),
        (20, 7.5),
        (35, 60),
    ]
    # Every bar's track has the same place and width: one time axis for all depths.
    assert len({tuple(s["track"]) for s in shown}) == 1
    assert [s["current"] for s in shown] == [False, False, False, False, True]
    console.screenshot("trace")

    # Each span opens its own record, whose tree marks it.
    page.locator("section.trace").get_by_role("link", name="rerank").click()
    expect(page).to_have_url(f"{console.url}/#/requests/{SPANS[3]['id']}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("rerank")
    expect(page.locator("section.card", has_text="reranker unavailable")).to_be_visible()
    assert [s["current"] for s in tree(page)] == [False, False, False, True, False]
    assert console.errors == []


def test_a_record_outside_any_trace_has_no_trace_card(console: Console, log: Log) -> None:
    log(record(1))
    page = console.sign_in(route="#/requests/req_console_0001")
    expect(page.get_by_role("heading", name="Summary", exact=True)).to_be_visible()
    expect(page.locator("section.trace")).to_have_count(0)
    assert console.errors == []


LONG_NAME = "RunnableSequence.invoke/RunnableParallel<context,question>/ChatPromptTemplate"


def bars(page: Page) -> dict[str, tuple[float, float]]:
    """Each span's bar as (start, end), in % of the trace's time axis, by span name."""
    rows = page.locator("section.trace li[role=treeitem]")
    found = rows.evaluate_all(
        """rows => rows.map(row => {
            const bar = row.querySelector(".trace-bar");
            const left = parseFloat(bar.style.left);
            return [row.querySelector("a").title, [left, left + parseFloat(bar.style.width)]];
        })"""
    )
    return {name: (start, end) for name, (start, end) in found}


def test_a_childs_bar_ends_within_its_parents(console: Console, log: Log) -> None:
    # The child's latency runs 400 ms past its parent's end (clocks of two processes, say).
    log(
        span(1, "handle", 0, 1000, None),
        span(2, LONG_NAME, 800, 600, 1),
        span(3, "format", 1100, 300, None),
    )
    page = console.sign_in(route="#/requests/req_console_0001")
    expect(page.locator("section.trace li[role=treeitem]")).to_have_count(3)

    shown = bars(page)
    parent, child = shown["handle"], shown[LONG_NAME]
    assert parent == pytest.approx((0, 1000 / 1400 * 100))
    assert child[0] == pytest.approx(800 / 1400 * 100)
    assert child[1] <= parent[1] + 1e-9
    # Its duration still says what was logged.
    row = page.locator("section.trace li[role=treeitem]", has_text="format").first
    expect(row.locator(".trace-duration")).to_have_text("300 ms")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_long_span_name_can_be_read(console: Console, log: Log, viewport: dict[str, int]) -> None:
    log(span(1, "handle", 0, 1000, None), span(2, LONG_NAME, 100, 600, 1))
    page = console.sign_in(route="#/requests/req_console_0002")
    page.set_viewport_size(viewport)
    link = page.locator("section.trace").get_by_role("link", name=LONG_NAME)
    expect(link).to_be_visible()
    # On a laptop a cut name shows whole on hover; a phone has no hover, so it wraps there.
    assert link.get_attribute("title") == LONG_NAME
    cell = link.locator("xpath=..")
    if viewport is PHONE:
        assert cell.evaluate("el => el.scrollWidth <= el.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        console.screenshot("trace-phone")
