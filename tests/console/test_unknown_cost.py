"""A model with no known price reads "—" with the reason on hover, never "$0" (issue 30.3).

In the request list (laptop and phone), the run panel's answer and the analytics totals,
which also say how many records had no price.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from promptrail.testing import OpenAIStub

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record
from .steps import run_panel

Log = Callable[..., None]

REASON = "Cost unknown: no price for this model"


def unpriced(number: int, model: str, **fields: object) -> dict[str, object]:
    """A record of ``model`` logged without a cost: only the collector's price list could say."""
    return record(
        number, model=model, usage={"prompt_tokens": 1000, "completion_tokens": 200}, **fields
    )


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_list_shows_a_dash_with_the_reason_for_an_unknown_price(
    console: Console, log: Log, viewport: dict[str, int]
) -> None:
    log(
        unpriced(1, "gpt-9-ultra", created_at="2026-11-24T10:00:00Z"),
        record(2, created_at="2026-11-24T09:00:00Z"),
    )
    page = console.sign_in()
    page.set_viewport_size(viewport)
    cost = page.locator("table.records tbody td[data-label='Cost']")
    expect(cost).to_have_count(2)
    assert cost.all_inner_texts() == ["—", "$0.0012"]
    assert cost.first.locator("span").get_attribute("title") == REASON
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


def test_analytics_totals_say_how_many_records_had_no_price(console: Console, log: Log) -> None:
    log(
        unpriced(1, "gpt-9-ultra"),
        unpriced(2, "my-finetune-xyz"),
        record(3),
    )
    route = "#/analytics?start_date=2026-11-24&end_date=2026-11-24"
    page = console.sign_in(route=route)
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    total = page.locator("section.metric-cost .total")
    expect(total).to_have_text("$0.00122 records with no price")
    assert total.locator(".unpriced").inner_text() == "2 records with no price"
    assert "not counted" in (total.locator(".unpriced").get_attribute("title") or "")
    # Grouped by model, an unpriced model's bar reads $0: the card says why.
    page.get_by_label("Group by").select_option("model")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("section.metric-cost .unpriced-note")).to_have_text(
        "2 records have no price for their model: counted as $0 in the chart."
    )
    expect(page.locator("section.metric-usage .unpriced-note")).to_have_count(0)
    page.get_by_label("Group by").select_option("")

    # With only unpriced records the total is unknown, not "$0".
    page.get_by_label("Model").fill("gpt-9-ultra")
    page.get_by_role("button", name="Apply").click()
    expect(total).to_have_text("—1 record with no price")
    assert total.locator("span").first.get_attribute("title") == REASON


def test_a_run_of_an_unpriced_model_answers_a_dash_not_zero(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Hello Ada."
    _, run = run_panel(console, client, "Say hello to {name}.", model="gpt-9-ultra")
    run.get_by_label("name", exact=True).fill("Ada")
    run.get_by_role("button", name="Run").click()

    status = run.get_by_role("status")
    expect(status).to_contain_text("Done:")
    assert "$0" not in status.inner_text()
    expect(status.locator(".unknown-cost")).to_have_text("—")
    assert status.locator(".unknown-cost").get_attribute("title") == REASON
