"""The Traces, Sessions and Users pages (issue 32 point 4): a trace's tree and waterfall with every
kind, read whole; a session read as a conversation; users with their totals, sessions and model
calls; all reached from a record's detail; hostile text shown as text; keyboard, phone, dark."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record
from .steps import pairs, rows

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

Log = Callable[..., None]

# The session and user lists cover the last 30 days by default: records are logged as of now.
NOW = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
SCRIPT = "<script>window.pwned = 'script'</script>"
IMAGE = "<img src=x onerror=\"window.pwned = 'img'\">"
SESSION = f"chat-7 {IMAGE}"
USER = f"ada {SCRIPT}"


def at(offset_ms: int) -> str:
    """NOW plus ``offset_ms``, as the API takes times."""
    return (NOW + timedelta(milliseconds=offset_ms)).isoformat().replace("+00:00", "Z")


def span(
    number: int,
    name: str,
    kind: str,
    offset_ms: int,
    latency_ms: int,
    parent: int | None,
    **fields: Any,
) -> dict[str, Any]:
    """Record ``number`` of TRACE: a ``kind`` span under span ``parent``, of the session's user."""
    model_call = kind in ("llm", "embedding")
    if not model_call:
        fields.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0})
    return record(
        number,
        created_at=at(offset_ms),
        prompt_name="",
        version=None,
        span_name=name,
        kind=kind,
        model=fields.pop("model", "gpt-4o-mini" if model_call else ""),
        trace_id=TRACE,
        span_id=f"{number:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        latency_ms=latency_ms,
        metadata={"user_id": USER, "session_id": SESSION},
        input_variables={},
        **fields,
    )


SPANS = [
    span(1, f"answer {SCRIPT}", "chain", 0, 2000, None),
    span(2, "retrieve", "retriever", 100, 500, 1),
    span(3, "embed_query", "embedding", 150, 200, 2, model="text-embedding-3-small"),
    span(4, "lookup_order", "tool", 400, 150, 1, status="error", error="orders API down"),
    span(5, "chat.completions", "llm", 700, 1200, 1, output={"content": f"Shipped. {IMAGE}"}),
]
OTHER = record(
    9,
    created_at=at(-60_000),
    trace_id=OTHER_TRACE,
    span_id="b" * 16,
    span_name="classify",
    metadata={"user_id": "u-2", "session_id": "chat-8"},
)


def no_markup_ran(page: Page, console: Console) -> None:
    """Nothing a record holds became an element or ran."""
    assert page.locator("main").locator("script, img, svg, iframe").count() == 0
    assert page.evaluate("window.pwned") is None
    assert console.errors == []


def tree(page: Page) -> list[tuple[int, str, str, str]]:
    """The trace's rows in reading order: depth, kind, name and status."""
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    found = page.locator("section.trace li[role=treeitem]").evaluate_all(
        """rows => rows.map(row => [
            Number(row.getAttribute("aria-level")) - 1,
            row.querySelector(".kind-tag").innerText,
            row.querySelector("a").innerText,
            row.querySelector(".badge").innerText,
        ])"""
    )
    return [tuple(row) for row in found]


def test_the_traces_list_filters_and_a_trace_shows_every_kind(console: Console, log: Log) -> None:
    log(*SPANS, OTHER)
    page = console.sign_in(route="#/traces")
    expect(page.get_by_role("heading", name="Traces", level=1)).to_be_visible()
    listed = rows(page)
    assert [row[1] for row in listed] == [f"answer {SCRIPT}", "classify"]
    # Started, name, duration, records, model calls, errors, tokens, cost, user, session.
    assert listed[0][2:] == ["2,000 ms", "5", "2", "1", "246", "$0.0024", USER, SESSION]
    console.screenshot("traces")

    # Keyboard only: the name filter, then the trace's link.
    page.get_by_label("Name").fill("classify")
    page.keyboard.press("Enter")
    page.wait_for_url("**/#/traces?name=classify")
    assert [row[1] for row in rows(page)] == ["classify"]
    page.get_by_role("link", name="Clear").click()
    expect(page.locator("table.records tbody tr")).to_have_count(2)
    page.locator("table.records tbody tr").first.get_by_role("link").first.focus()
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{console.url}/#/traces/{TRACE}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"answer {SCRIPT}")
    assert tree(page) == [
        (0, "chain", f"answer {SCRIPT}", "success"),
        (1, "retriever", "retrieve", "success"),
        (2, "embedding", "embed_query", "success"),
        (1, "tool", "lookup_order", "error"),
        (1, "llm", "chat.completions", "success"),
    ]
    summary = pairs(page, "Summary")
    assert {k: summary[k] for k in ("Duration", "Records", "Model calls", "Errors", "User")} == {
        "Duration": "2,000 ms",
        "Records": "5",
        "Model calls": "2",
        "Errors": "1",
        "User": USER,
    }
    console.screenshot("trace-page")
    page.emulate_media(color_scheme="dark")
    console.screenshot("trace-page-dark")

    # Each span opens its record; the record leads back to its trace page.
    page.locator("section.trace").get_by_role("link", name="lookup_order").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("lookup_order")
    page.get_by_role("navigation", name="This record's trace, session and user").get_by_role(
        "link", name="Trace", exact=True
    ).click()
    expect(page).to_have_url(f"{console.url}/#/traces/{TRACE}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"answer {SCRIPT}")

    # The request log is the log of model calls: the trace's chain, retriever and tool are not
    # in it.
    page.get_by_role("link", name="Requests").click()
    assert sorted(row[3] for row in rows(page)) == [
        "gpt-4o-mini",
        "gpt-4o-mini",
        "text-embedding-3-small",
    ]
    no_markup_ran(page, console)


def test_a_trace_over_many_pages_is_read_whole(console: Console, log: Log) -> None:
    root = span(1, "batch_job", "chain", 0, 60_000, None)
    children = [span(n, f"step-{n}", "tool", n * 100, 50, 1) for n in range(2, 251)]
    log(root, *children[:120])
    log(*children[120:])
    page = console.sign_in(route=f"#/traces/{TRACE}")
    expect(page.locator("section.trace li[role=treeitem]")).to_have_count(250)
    expect(page.locator("section.trace")).to_contain_text("250 spans over 60,000 ms")
    # A record's own detail reads its trace whole too (it showed the newest 100).
    page.goto(f"{console.url}/#/requests/{root['id']}")
    expect(page.locator("section.trace li[role=treeitem]")).to_have_count(250)
    assert console.errors == []


TURNS = [
    record(
        21,
        created_at=at(0),
        input_variables={"question": f"Where is my order? {SCRIPT}"},
        output={"content": "It ships today."},
        metadata={"user_id": USER, "session_id": SESSION},
        trace_id=TRACE,
        span_id="c" * 16,
        latency_ms=900,
    ),
    record(
        22,
        created_at=at(30_000),
        prompt_name="",
        version=None,
        input_variables={},
        input=[
            {"role": "system", "content": "You answer customers."},
            {"role": "user", "content": f"Can it come sooner? {IMAGE}"},
        ],
        output={"content": f"Express is $5. {IMAGE}"},
        metadata={"user_id": USER, "session_id": SESSION},
        latency_ms=1400,
        usage={"prompt_tokens": 50, "completion_tokens": 10, "estimated_cost_usd": 0.002},
    ),
    record(
        23,
        created_at=at(60_000),
        status="error",
        error="provider timed out",
        output=None,
        input_variables={"question": "Hello?"},
        metadata={"user_id": USER, "session_id": SESSION},
        latency_ms=30_000,
    ),
]


def turns(page: Page) -> list[dict[str, str]]:
    """The conversation's turns: head, input and output as read."""
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    expect(page.locator(".turn-input", has_text="Loading…")).to_have_count(0)
    found = page.locator("ol.conversation > li").evaluate_all(
        """items => items.map(li => ({
            head: li.querySelector(".turn-head").innerText,
            input: li.querySelector(".turn-input").innerText.trim(),
            output: li.querySelector(".turn-output").innerText.trim(),
        }))"""
    )
    return list(found)


def test_a_session_reads_as_a_conversation_reached_from_a_record(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(*TURNS, OTHER)
    scored = client.post(
        "/v1/scores", json={"request_id": "req_console_0021", "name": "helpful", "value": 1}
    )
    assert scored.status_code == 201, scored.text
    page = console.sign_in(route="#/requests/req_console_0022")
    related = page.get_by_role("navigation", name="This record's trace, session and user")
    related.get_by_role("link", name=f"Session {SESSION}").click()

    expect(page.get_by_role("heading", level=1)).to_contain_text(SESSION)
    # A failed turn shows its error, read from its record (list items carry none).
    failed = page.locator("ol.conversation > li").nth(2).locator(".turn-output")
    expect(failed.locator("pre.error")).to_have_text("provider timed out")
    shown = turns(page)
    assert [t["input"] for t in shown] == [
        f"question\nWhere is my order? {SCRIPT}",
        f"Can it come sooner? {IMAGE}",
        "question\nHello?",
    ]
    assert [t["output"] for t in shown] == [
        "It ships today.",
        f"Express is $5. {IMAGE}",
        "No output (the call failed).\n\nprovider timed out",
    ]
    # Each turn's model, latency, cost and scores; its trace when it has one.
    assert "gpt-4o-mini" in shown[0]["head"] and "900 ms" in shown[0]["head"]
    assert "$0.0012" in shown[0]["head"] and "helpful 1" in shown[0]["head"]
    assert "$0.002" in shown[1]["head"] and "1,400 ms" in shown[1]["head"]
    assert "error" in shown[2]["head"]
    assert (
        page.locator("ol.conversation > li").nth(1).get_by_role("link", name="Trace").count() == 0
    )
    assert pairs(page, "Summary")["Model calls"] == "3"
    console.screenshot("session")

    first = page.locator("ol.conversation > li").first
    first.get_by_role("link", name="Trace").click()
    expect(page).to_have_url(f"{console.url}/#/traces/{TRACE}")
    expect(page.locator("section.trace li[role=treeitem]")).to_have_count(1)
    page.go_back()
    turns(page)
    page.locator("ol.conversation > li").nth(2).get_by_role("link").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("support-reply")
    expect(page.locator("main")).to_contain_text("provider timed out")

    page.goto(f"{console.url}/#/sessions")
    assert [row[1] for row in rows(page)] == [f"{SESSION}\nhelpful 1", "chat-8"]
    console.screenshot("sessions")
    page.set_viewport_size(PHONE)
    page.goto(f"{console.url}/#/sessions/{SESSION}")
    turns(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.emulate_media(color_scheme="dark")
    console.screenshot("session-phone-dark")
    no_markup_ran(page, console)


def test_users_show_their_totals_sessions_and_model_calls(console: Console, log: Log) -> None:
    log(*TURNS, OTHER)
    page = console.sign_in(route="#/requests/req_console_0023")
    page.get_by_role("navigation", name="This record's trace, session and user").get_by_role(
        "link", name=f"User {USER}"
    ).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(USER)
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    sessions, calls = page.locator("section.card table.records").all()
    expect(sessions.locator("tbody tr")).to_have_count(1)
    expect(sessions.locator("tbody tr")).to_contain_text(SESSION)
    expect(calls.locator("tbody tr")).to_have_count(3)
    console.screenshot("user")

    page.get_by_role("link", name="← Users").click()
    page.wait_for_url("**/#/users")
    # The user's page (two tables) may still be drawn for a moment after the address changed.
    expect(page.get_by_role("heading", level=1)).to_have_text("Users")
    listed = rows(page)
    # User, last activity, first seen, model calls, sessions, errors, tokens, cost.
    mine = next(row for row in listed if row[0] == USER)
    assert mine[3:] == ["3", "1", "1", "306", "$0.0044"]
    assert [row[0] for row in listed] == [USER, "u-2"]
    console.screenshot("users")

    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    cell = page.locator("table.records tbody tr").first.locator("td[data-label='Cost']")
    assert cell.evaluate("el => getComputedStyle(el, '::before').content") == '"Cost"'
    console.screenshot("users-phone")
    page.set_viewport_size(LAPTOP)
    page.emulate_media(color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 21, 24)"
    console.screenshot("users-dark")
    # The user's link leads to the user's page; nothing of the records ran.
    page.get_by_role("link", name=USER).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(USER)
    no_markup_ran(page, console)


def test_a_page_still_loading_does_not_draw_over_the_next_one(console: Console, log: Log) -> None:
    log(*SPANS, OTHER)
    page = console.sign_in(route="#/users")
    rows(page)
    # The trace's answer is held back, as from a slow collector, while the user moves on.
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(f"**/v1/traces/{TRACE}?*", hold)
    page.evaluate(f"window.location.hash = '#/traces/{TRACE}'")
    while not held:
        page.wait_for_timeout(50)
    page.evaluate("window.location.hash = '#/sessions'")
    expect(page.get_by_role("heading", level=1)).to_have_text("Sessions")
    rows(page)

    with page.expect_response(f"**/v1/traces/{TRACE}?*"):
        held[0].continue_()
    page.wait_for_timeout(500)  # time for the trace page to draw, had it been going to
    expect(page.get_by_role("heading", level=1)).to_have_text("Sessions")
    expect(page.locator("section.trace")).to_have_count(0)
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    assert console.errors == []
