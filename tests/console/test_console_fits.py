"""What a new user saw cut, squeezed or unreadable in the console (issue 47, point 9): the
comparison's cost table wider than a phone, the experiments list cutting "Ran" and hiding
"Created" at laptop width, boolean scores as "thumbs 0/1", a trace axis reading "0 ms / 1 ms /
1 ms", and placeholders and choices cut off; every page looked at on a phone and a laptop, light
and dark (the screenshots are written for that)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from .conftest import LAPTOP, PHONE, Console, expect
from .records import GALLERY, record
from .steps import fits, post, settled

Log = Callable[..., None]
TRACE = "0af7651916cd43dd8448eb211c80319c"

# The controls of the page whose text (a placeholder, or a select's chosen option) is wider
# than the room the control gives it: each as "id: text".
CUT_CONTROLS = """() => {
  const ctx = document.createElement("canvas").getContext("2d");
  const cut = [];
  for (const el of document.querySelectorAll("main input, main select, main textarea")) {
    if (el.offsetParent === null || el.type === "checkbox" || el.type === "radio") continue;
    const style = getComputedStyle(el);
    ctx.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const select = el.tagName === "SELECT";
    const text = select ? (el.selectedOptions[0]?.text ?? "") : el.placeholder;
    if (!text) continue;
    // A select's arrow takes about a line's height of its width.
    const arrow = select ? parseFloat(style.fontSize) * 1.25 : 0;
    const room = el.clientWidth - parseFloat(style.paddingLeft)
      - parseFloat(style.paddingRight) - arrow;
    if (ctx.measureText(text).width > room + 0.5) cut.push(`${el.id || el.name}: ${text}`);
  }
  return cut;
}"""


def client_experiment(
    client: httpx.Client, name: str, results: list[tuple[str, float, float, float]]
) -> str:
    """A finished client experiment over "qa": (item, correct, latency_ms, cost) per result."""
    made = post(client, "/v1/experiments", {"dataset": "qa", "task": "client", "name": name})
    body = [
        {"item_id": item, "output": f"answer {item}", "scores": {"correct": value},
         "latency_ms": latency, "estimated_cost_usd": cost}
        for item, value, latency, cost in results
    ]  # fmt: skip
    post(client, f"/v1/experiments/{made['id']}/results", {"results": body})
    post(client, f"/v1/experiments/{made['id']}/complete", {}, status=200)
    return str(made["id"])


def qa_dataset(client: httpx.Client) -> None:
    post(client, "/v1/datasets", {"name": "qa"})
    items = [{"id": q, "input_variables": {"q": q}, "expected_output": "x"} for q in ("q1", "q2")]
    post(client, "/v1/datasets/qa/items", {"items": items})


def test_the_cost_and_latency_table_fits_a_phone(console: Console, client: httpx.Client) -> None:
    qa_dataset(client)
    base = client_experiment(
        client,
        "baseline with the long system prompt",
        [("q1", 1.0, 12_345.6, 0.001234), ("q2", 0.0, 23_456.7, 0.002345)],
    )
    candidate = client_experiment(
        client,
        "candidate with the short system prompt",
        [("q1", 0.0, 1_234.5, 0.000123), ("q2", 1.0, 2_345.6, 0.000234)],
    )
    console.page.set_viewport_size(PHONE)
    page = settled(
        console.sign_in(route=f"#/experiments/compare?base={base}&candidate={candidate}")
    )
    table = page.locator("table.totals")
    expect(table.locator("tbody tr")).to_have_count(2)
    # The table lies within its card, and the card within the screen: nothing to scroll sideways
    # to read a delta (the table was 429 px wide in a 390 px screen).
    box = table.evaluate(
        """t => {
            const card = t.closest("section.card");
            const inner = card.clientWidth - parseFloat(getComputedStyle(card).paddingLeft)
                - parseFloat(getComputedStyle(card).paddingRight);
            return {table: t.getBoundingClientRect().width, room: inner,
                    right: t.getBoundingClientRect().right, screen: window.innerWidth};
        }"""
    )
    assert box["table"] <= box["room"] + 0.5, box
    assert box["right"] <= box["screen"], box
    # And readable: no cell squeezed to a column of letters (two lines at most: "1,790 / ms").
    lines = table.locator("th, td").evaluate_all(
        """cells => cells.map(c => {
            const style = getComputedStyle(c);
            const line = parseFloat(style.fontSize) * 1.5;
            const text = c.getBoundingClientRect().height - parseFloat(style.paddingTop)
                - parseFloat(style.paddingBottom);
            return [c.innerText, Math.round(text / line)];
        })"""
    )
    assert all(count <= 2 for _, count in lines), lines
    assert fits(page)
    money = table.locator("tbody tr").first.locator("td").all_inner_texts()
    assert money == ["$0.003579", "$0.000357", "\u2212$0.003222"]
    console.screenshot("fits-compare-phone", for_docs=False)
    page.emulate_media(color_scheme="dark")
    console.screenshot("fits-compare-phone-dark", for_docs=False)
    assert console.errors == []


def test_the_experiments_list_shows_every_column_whole_on_a_laptop(
    console: Console, client: httpx.Client
) -> None:
    qa_dataset(client)
    prompt = "support-reply-for-enterprise-customers"
    post(client, "/v1/prompts", {"name": prompt, "template": "Answer {q}.", "model": "gpt-4o"})
    response = client.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 1})
    assert response.status_code == 200, response.text
    post(
        client,
        "/v1/experiments",
        {
            "name": "enterprise answers against the production label, second try",
            "dataset": "qa",
            "prompt": prompt,
            "label": "production",
            "evaluators": [{"type": "exact_match"}, {"type": "similarity"}],
        },
    )
    client_experiment(client, "a client-side run", [("q1", 1.0, 100.0, 0.001)])

    page = settled(console.sign_in(route="#/experiments"))
    rows = page.locator("table.records tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator("td").nth(2)).to_have_text(f"{prompt} v1")
    # No cell cut (an ellipsis or hidden overflow) and no column out of sight: the whole row
    # fits the table's box at 1280 px.
    cut = rows.evaluate_all(
        """rows => rows.flatMap(r => [...r.cells]
            .filter(c => c.scrollWidth > c.clientWidth + 1)
            .map(c => c.dataset.label))"""
    )
    assert cut == []
    wrap = page.locator(".table-wrap")
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")
    created = rows.first.locator("td").last
    assert created.evaluate(
        "c => c.getBoundingClientRect().right <= c.closest('.table-wrap')"
        ".getBoundingClientRect().right"
    )
    # The compare picker names the two newest whole, the long name too.
    assert page.evaluate(CUT_CONTROLS) == []
    console.screenshot("fits-experiments", for_docs=False)
    page.emulate_media(color_scheme="dark")
    console.screenshot("fits-experiments-dark", for_docs=False)
    page.set_viewport_size(PHONE)
    assert fits(page)
    console.screenshot("fits-experiments-phone", for_docs=False)
    assert console.errors == []


def test_boolean_scores_read_true_false_or_their_share(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(
        record(1),
        record(2, created_at="2026-11-23T09:15:00Z"),
        record(3, created_at="2026-11-22T09:15:00Z"),
    )
    scores = [
        ("req_console_0001", "thumbs", True),
        ("req_console_0002", "thumbs", False),
        ("req_console_0003", "thumbs", True),
        ("req_console_0003", "thumbs", False),
        ("req_console_0001", "helpfulness", 1),
        ("req_console_0002", "resolved", False),
    ]
    # "resolved" is boolean by its config; "thumbs" by its scores.
    response = client.put("/v1/score-configs/resolved", json={"data_type": "boolean"})
    assert response.status_code == 200, response.text
    batch = [{"request_id": r, "name": n, "value": v} for r, n, v in scores]
    assert client.post("/v1/scores/batch", json={"scores": batch}).json()["data"]["accepted"] == 6

    page = settled(console.sign_in())
    rows = page.locator("table.records tbody tr")
    expect(rows).to_have_count(3)
    badges = [rows.nth(i).locator(".badge.score") for i in range(3)]
    expect(badges[0]).to_have_text(["helpfulness 1", "thumbs true"])
    expect(badges[1]).to_have_text(["resolved false", "thumbs false"])
    expect(badges[2]).to_have_text(["thumbs 50% true"])
    expect(badges[0].nth(1)).to_have_class("badge score good")
    expect(badges[1].nth(1)).to_have_class("badge score bad")
    console.screenshot("fits-boolean-badges", for_docs=False)

    rows.first.get_by_role("link").first.click()
    detail = settled(page).locator("section.scores-card li.score-item .badge")
    expect(detail).to_have_count(2)
    assert sorted(detail.all_inner_texts()) == ["helpfulness 1", "thumbs true"]
    assert console.errors == []


def test_the_trace_time_axis_has_distinct_round_ticks(console: Console, log: Log) -> None:
    # A trace of 1 ms: its axis read "0 ms / 1 ms / 1 ms".
    log(
        record(1, trace_id=TRACE, span_id="00000000000000a1", span_name="answer", latency_ms=1,
               created_at="2026-11-24T10:00:00.000Z", prompt_name=""),
        record(2, trace_id=TRACE, span_id="00000000000000a2", parent_span_id="00000000000000a1",
               span_name="lookup", latency_ms=0, created_at="2026-11-24T10:00:00.000Z",
               prompt_name=""),
    )  # fmt: skip
    page = settled(console.sign_in(route=f"#/traces/{TRACE}"))
    ticks = page.locator(".trace-axis .trace-tick")
    expect(ticks.first).to_have_text("0 ms")
    labels = ticks.all_inner_texts()
    assert labels == ["0 ms", "0.25 ms", "0.5 ms", "0.75 ms", "1 ms"]
    # Each label stands where its time falls: left to right, over the bars' column.
    lefts = ticks.evaluate_all("ts => ts.map(t => t.getBoundingClientRect().left)")
    assert lefts == sorted(lefts) and len(set(lefts)) == len(lefts)
    console.screenshot("fits-trace-axis", for_docs=False)
    assert console.errors == []


def test_every_page_shows_its_placeholders_choices_and_columns_whole(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(*GALLERY)
    session = {"user_id": "u-1", "session_id": "chat-1"}
    log(
        record(9, trace_id=TRACE, span_id="00000000000000b1", span_name="answer",
               created_at="2026-11-24T10:00:00.000Z", metadata=session),
    )  # fmt: skip
    post(client, "/v1/prompts", {"name": "greeting", "template": "Hi {q}.", "model": "gpt-4o"})
    qa_dataset(client)
    base = client_experiment(client, "baseline", [("q1", 1.0, 100.0, 0.001)])
    candidate = client_experiment(client, "candidate", [("q1", 0.0, 120.0, 0.002)])
    routes = {
        "requests": "#/requests",
        "search": "#/requests?q=order",
        "request": "#/requests/req_console_0001",
        "traces": "#/traces",
        "trace": f"#/traces/{TRACE}",
        "sessions": "#/sessions",
        "session": "#/sessions/chat-1",
        "users": "#/users",
        "user": "#/users/u-1",
        "prompts": "#/prompts",
        "new-prompt": "#/prompts/+new",
        "prompt": "#/prompts/greeting",
        "prompt-diff": "#/prompts/greeting/diff?a=1&b=1",
        "review": "#/review",
        "review-queue": "#/review?name=thumbs",
        "analytics": "#/analytics",
        "datasets": "#/datasets",
        "dataset": "#/datasets/qa",
        "experiments": "#/experiments",
        "experiment": f"#/experiments/{base}",
        "compare": f"#/experiments/compare?base={base}&candidate={candidate}",
    }
    page = settled(console.sign_in())
    cut: dict[str, list[str]] = {}
    for viewport, suffix in ((LAPTOP, ""), (PHONE, "-phone")):
        page.set_viewport_size(viewport)
        for name, route in routes.items():
            page.goto(f"{console.url}/{route}")
            settled(page)
            expect(page.locator("main h1").first).to_be_visible()
            found = page.evaluate(CUT_CONTROLS)
            # Nor a table scrolled sideways within its box (a column out of sight).
            found += page.locator(".table-wrap").evaluate_all(
                """ws => ws.filter(w => w.scrollWidth > w.clientWidth + 1)
                    .map(w => `table: ${w.querySelector("table").getAttribute("aria-label")
                        ?? w.querySelector("table").className}`)"""
            )
            if found:
                cut[f"{name}{suffix}"] = found
            assert fits(page), f"{name}{suffix} is wider than the screen"
            page.emulate_media(color_scheme="light")
            console.screenshot(f"look-{name}{suffix}", for_docs=False)
            page.emulate_media(color_scheme="dark")
            console.screenshot(f"look-{name}{suffix}-dark", for_docs=False)
            page.emulate_media(color_scheme="light")
    assert cut == {}, cut
    assert console.errors == []
