"""Sign in, then read the request log: the table, its filters, paging and one record's detail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.keys import DEFAULT_KEY

from .conftest import PHONE, Console, expect
from .records import GALLERY, record
from .steps import card, filter_by, pairs, rows

Log = Callable[..., None]


def test_a_wrong_key_is_refused_clearly_and_the_right_key_signs_in(console: Console) -> None:
    urls: list[str] = []
    console.page.on("request", lambda request: urls.append(request.url))
    page = console.open()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    console.screenshot("sign-in")

    console.sign_in("pr-not-a-real-key")

    expect(page.get_by_role("alert")).to_have_text(
        "This API key was not accepted. Check it and paste it again."
    )
    assert page.evaluate("sessionStorage.length") == 0

    console.sign_in(DEFAULT_KEY)

    expect(page.get_by_role("heading", name="Requests")).to_be_visible()
    expect(page.locator("p.summary")).to_have_text("No requests logged yet.")
    assert page.evaluate("Object.values(sessionStorage)") == [DEFAULT_KEY]
    assert urls and not [url for url in urls if "pr-" in url], "a key went into a URL"


def test_a_key_the_api_stops_accepting_leads_back_to_sign_in(console: Console) -> None:
    page = console.open()
    # The first load's own route must have drawn its sign-in form first: a route still asking
    # the collector when the key appears would use it, be refused and sign the tab out (removing
    # the key) before the reload, which would then load a tab with no key at all.
    expect(page.get_by_label("API key")).to_be_visible()
    page.evaluate("sessionStorage.setItem('promptrail.apiKey', 'pr-revoked')")

    page.reload()

    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("status")).to_have_text(
        "This API key is no longer accepted. Paste a valid key to sign in again."
    )
    expect(page.get_by_label("API key")).to_be_focused()


def test_the_table_shows_each_record_newest_first(console: Console, log: Log) -> None:
    log(*GALLERY)

    page = console.sign_in()

    assert rows(page) == [
        ["2026-11-24 09:15:00", "support-reply", "3", "gpt-4o-mini", "success", "123",
         "$0.0012", "842 ms"],
        ["2026-11-24 08:52:10", "summarize-ticket", "7", "claude-3-5-haiku", "error", "1,830",
         "$0.0015", "30,012 ms"],
        ["2026-11-23 17:40:03", "classify-intent", "2", "gpt-4o", "success", "417",
         "$0.00109", "388 ms"],
        ["2026-11-22 11:05:44", "support-reply", "3", "gpt-4o-mini", "success", "137",
         "$0.000039", "1,204 ms"],
        ["2026-11-20 06:30:00", "summarize-ticket", "6", "claude-3-5-haiku", "success", "2,390",
         "$0.00249", "2,930 ms"],
    ]  # fmt: skip
    expect(page.locator("p.summary")).to_have_text("5 requests shown.")
    console.screenshot("requests")


def test_each_filter_narrows_the_table(console: Console, log: Log) -> None:
    log(*GALLERY)
    page = console.sign_in()

    def ids_after(**values: str) -> list[str]:
        filter_by(page, **values)
        return [row[0] for row in rows(page)]

    assert ids_after(status="error") == ["2026-11-24 08:52:10"]
    assert ids_after(prompt="summarize-ticket") == ["2026-11-24 08:52:10", "2026-11-20 06:30:00"]
    assert ids_after(key="user_id", value="u-2") == ["2026-11-24 08:52:10", "2026-11-23 17:40:03"]
    assert ids_after(from_date="2026-11-22", to_date="2026-11-23") == [
        "2026-11-23 17:40:03",
        "2026-11-22 11:05:44",
    ]
    assert ids_after(status="success", key="env", value="prod") == [
        "2026-11-24 09:15:00",
        "2026-11-22 11:05:44",
        "2026-11-20 06:30:00",
    ]
    filter_by(page, prompt="no-such-prompt")
    expect(page.locator("p.summary")).to_have_text("No requests match these filters.")
    # The filters live in the address: a reload or a shared link shows the same list.
    assert page.url.endswith("#/requests?prompt_name=no-such-prompt")


def test_load_more_follows_the_cursor_one_page_at_a_time(console: Console, log: Log) -> None:
    log(*[record(n, created_at=f"2026-11-24T10:{n // 60:02d}:{n % 60:02d}Z") for n in range(60)])

    page = console.sign_in()

    assert len(rows(page)) == 50
    expect(page.locator("p.summary")).to_have_text("50 requests shown, more to load.")
    page.get_by_role("button", name="Load more").click()
    expect(page.locator("p.summary")).to_have_text("60 requests shown.")
    times = [row[0] for row in rows(page)]
    assert times == sorted(times, reverse=True) and len(set(times)) == 60
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()


def detail_record() -> dict[str, Any]:
    return record(
        9,
        input=[
            {"role": "system", "content": "You answer customers of an online shop."},
            {"role": "user", "content": "Where is my order?"},
        ],
        timing={"total_latency_ms": 842, "pre_process_ms": 12, "llm_call_ms": 810,
                "post_process_ms": 20},
        integration={"pre_process_executed": True, "post_process_executed": False,
                     "errors": []},
        time_to_first_token_ms=231,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id="00f067aa0ba902b7",
    )  # fmt: skip


def test_the_detail_shows_everything_known_of_one_record(console: Console, log: Log) -> None:
    log(detail_record(), record(10, prompt_name="other", created_at="2026-11-24T09:00:00Z"))
    page = console.sign_in(route="#/requests?prompt_name=support-reply")
    rows(page)

    # Keyboard only: the first cell's link is reachable with Tab and opens with Enter.
    page.get_by_role("link", name="2026-11-24 09:15:00").focus()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="support-reply")).to_be_visible()
    assert pairs(page, "Summary") | {"Trace id": "…"} == {
        "Time (UTC)": "2026-11-24 09:15:00",
        "Status": "success",
        "Prompt": "support-reply",
        "Version": "3",
        "Model": "gpt-4o-mini",
        "Provider": "openai",
        "Latency": "842 ms",
        "Trace id": "…",
        "Span id": "00f067aa0ba902b7",
    }
    assert pairs(page, "Input variables") == {
        "customer": "Ada",
        "question": "Where is my order?",
    }
    assert card(page, "Input").locator("li").all_inner_texts() == [
        "SYSTEM\nYou answer customers of an online shop.",
        "USER\nWhere is my order?",
    ]
    assert card(page, "Output").locator("pre.output").inner_text() == (
        "Hello Ada, your order ships today."
    )
    assert pairs(page, "Output") == {"finish_reason": "stop"}
    assert pairs(page, "Metadata") == {"user_id": "u-1", "env": "prod"}
    assert pairs(page, "Usage and cost") == {
        "Prompt tokens": "100",
        "Completion tokens": "23",
        "Total tokens": "123",
        "Estimated cost": "$0.0012",
    }
    assert pairs(page, "Timing") == {
        "Total latency": "842 ms",
        "Time to first token": "231 ms",
        "Pre-processing": "12 ms",
        "LLM call": "810 ms",
        "Post-processing": "20 ms",
    }
    assert pairs(page, "Integration") == {
        "Pre-process ran": "yes",
        "Post-process ran": "no",
        "Errors": "none",
    }
    console.screenshot("request-detail")

    page.get_by_role("link", name="← Requests").click()
    page.wait_for_url("**/#/requests?prompt_name=support-reply")
    assert [row[1] for row in rows(page)] == ["support-reply"]


def test_the_log_fits_a_phone_and_follows_the_dark_scheme(console: Console, log: Log) -> None:
    log(*GALLERY)
    page = console.sign_in()
    rows(page)

    page.set_viewport_size(PHONE)
    # Nothing scrolls sideways, neither the page nor the log: its rows become cards, and each
    # value is shown under its column's name.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.locator(".table-wrap").evaluate("el => el.scrollWidth <= el.clientWidth")
    card = page.locator("table.records tbody tr").first
    for label in ("Prompt", "Model", "Status", "Tokens", "Cost", "Latency"):
        cell = card.locator(f"td[data-label='{label}']")
        assert cell.evaluate("el => getComputedStyle(el, '::before').content") == f'"{label}"'
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    console.screenshot("requests-phone")

    page.set_viewport_size({"width": 1280, "height": 800})
    page.emulate_media(color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 21, 24)"
    console.screenshot("requests-dark")
