"""Full-text search with highlighted matches, and exports followed to their download."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable

from .conftest import Console, expect
from .records import GALLERY, record
from .steps import filter_by, rows

Log = Callable[..., None]


def search(console: Console, text: str) -> None:
    page = console.page
    page.get_by_label("Search text").fill(text)
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")


def test_search_shows_each_match_highlighted_in_its_field(console: Console, log: Log) -> None:
    log(
        record(1, output={"content": "Your <b>refund</b> & the REFUND fee are on the way."}),
        record(
            2,
            created_at="2026-11-23T10:00:00Z",
            prompt_name="classify-intent",
            input_variables={"message": "I want a refund, please"},
            metadata={"topic": "refunds"},
        ),
        record(3, created_at="2026-11-22T10:00:00Z", output={"content": "Order shipped."}),
    )
    page = console.sign_in()

    search(console, "refund")

    expect(page.get_by_role("status")).to_have_text("2 requests contain “refund”.")
    hits = page.locator("li.hit")
    expect(hits).to_have_count(2)
    first, second = hits.nth(0), hits.nth(1)
    expect(first.locator("dt")).to_have_text(["output"])
    expect(first.locator("dd")).to_have_text("Your <b>refund</b> & the REFUND fee are on the way.")
    expect(first.locator("mark")).to_have_text(["refund", "REFUND"])
    expect(second.locator("dt")).to_have_text(["input_variables.message", "metadata.topic"])
    expect(second.locator("mark")).to_have_text(["refund", "refund"])
    assert first.locator("b").count() == 0
    console.screenshot("search")

    # A hit opens its record; going back returns to the same search.
    second.get_by_role("link").click()
    expect(page.get_by_role("heading", name="classify-intent")).to_be_visible()
    page.get_by_role("link", name="← Requests").click()
    expect(page.locator("li.hit")).to_have_count(2)
    assert page.get_by_label("Search text").input_value() == "refund"


def test_a_search_without_matches_says_so(console: Console, log: Log) -> None:
    log(record(1))
    console.sign_in()

    search(console, "no such words")

    expect(console.page.get_by_role("status")).to_have_text("No requests contain “no such words”.")


def test_exports_download_the_filtered_records_as_csv_and_json(console: Console, log: Log) -> None:
    log(*GALLERY)
    page = console.sign_in()
    filter_by(page, status="success", key="env", value="prod")
    assert len(rows(page)) == 3

    with page.expect_download() as csv_download:
        page.get_by_role("button", name="Export CSV").click()
    expect(page.locator(".export-status")).to_have_text("Exported 3 records as CSV.")
    table = list(csv.DictReader(io.StringIO(csv_download.value.path().read_text())))

    with page.expect_download() as json_download:
        page.get_by_role("button", name="Export JSON").click()
    expect(page.locator(".export-status")).to_have_text("Exported 3 records as JSON.")
    lines = json_download.value.path().read_text().splitlines()

    ids = ["req_console_0001", "req_console_0004", "req_console_0005"]
    assert sorted(row["id"] for row in table) == ids
    assert sorted(json.loads(line)["id"] for line in lines) == ids
    assert csv_download.value.suggested_filename.endswith(".csv")
    assert json_download.value.suggested_filename.endswith(".jsonl")
    assert console.errors == []
