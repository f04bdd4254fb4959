"""A record's detail stays readable whatever the record holds (issue 30, points 5 and 6).

Long values (input, output, variables, metadata) show their start with a way to see and copy
all of it, so a 1 MB value does not make the page hundreds of thousands of pixels tall; a
long record id does not make a phone's page scroll sideways.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record

if TYPE_CHECKING:
    from playwright.sync_api import Page

Log = Callable[..., None]

BIG = "".join(f"line {n:06d} of a very long metadata value\n" for n in range(26_000))  # ~1 MB
LONG_OUTPUT = "word " * 400  # 2,000 characters on one line


def opened(console: Console, request_id: str, viewport: dict[str, int]) -> Page:
    page = console.sign_in(route=f"#/requests/{request_id}")
    page.set_viewport_size(viewport)
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    expect(page.get_by_role("heading", name="Metadata", exact=True)).to_be_visible()
    return page


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_megabyte_value_is_shown_cut_and_can_be_shown_and_copied_whole(
    console: Console, log: Log, viewport: dict[str, int]
) -> None:
    log(
        record(
            1,
            metadata={"user_id": "u-1", "dump": BIG},
            output={"content": LONG_OUTPUT, "finish_reason": "stop"},
        )
    )
    page = opened(console, "req_console_0001", viewport)

    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 6_000, f"the page is {height} px tall"
    dump = page.locator("table.kv tr", has=page.get_by_role("rowheader", name="dump"))
    shown = dump.locator("pre").inner_text()
    assert shown.startswith("line 000000 of a very long metadata value") and shown.endswith("…")
    assert len(shown) < 1_000
    # A short value is shown whole, with no buttons.
    assert page.locator("table.kv tr", has_text="user_id").locator("button").count() == 0
    output = page.locator("section.card", has=page.get_by_role("heading", name="Output"))
    expect(output.get_by_role("button", name="Show all (2,000 characters)")).to_be_visible()

    dump.get_by_role("button", name=f"Show all ({len(BIG):,} characters)").click()
    assert dump.locator("pre").evaluate("pre => pre.textContent") == BIG
    # Shown whole, the value scrolls inside its box: the page keeps its height.
    assert page.evaluate("document.documentElement.scrollHeight") < height + 800
    dump.get_by_role("button", name="Show less").click()
    assert len(dump.locator("pre").inner_text()) < 1_000

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    dump.get_by_role("button", name="Copy").click()
    expect(dump.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == BIG
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    if viewport is PHONE:
        console.screenshot("request-detail-long-phone")


def test_a_long_record_id_does_not_widen_a_phones_page(console: Console, log: Log) -> None:
    long_id = "req_" + "0123456789abcdef" * 4  # the longest id the API takes
    log(record(1, id=long_id, metadata={"trace": "x" * 300}))
    page = opened(console, long_id, PHONE)

    expect(page.get_by_text(long_id, exact=True)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
