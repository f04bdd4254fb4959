"""Markup and script in records, prompts and runs show as characters: nothing runs or loads."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from promptrail.testing import OpenAIStub

from .conftest import Console, expect
from .records import record

SCRIPT = "<script>window.pwned = 'script'</script>"
IMAGE = "<img src=x onerror=\"window.pwned = 'img'\">"
LINK = "<a href=\"javascript:window.pwned = 'link'\">open</a>"
SVG = "<svg onload=\"window.pwned = 'svg'\"></svg>"


def test_markup_in_a_record_is_shown_as_text_and_never_runs(
    console: Console, log: Callable[..., None]
) -> None:
    log(
        record(
            1,
            prompt_name=SCRIPT,
            model=IMAGE,
            input_variables={IMAGE: LINK, "svg": SVG},
            output={"content": f"{SCRIPT}{IMAGE}", LINK: SVG},
            metadata={"link": LINK, SCRIPT: IMAGE},
            input=[{"role": SCRIPT, "content": IMAGE}],
            error=LINK,
        )
    )
    page = console.sign_in()
    row = page.locator("table.records tbody tr")
    expect(row.locator("td").nth(1)).to_have_text(SCRIPT)
    expect(row.locator("td").nth(3)).to_have_text(IMAGE)

    row.locator("td").nth(1).click()

    expect(page.get_by_role("heading", level=1)).to_contain_text(SCRIPT)
    main = page.locator("main")
    expect(main.locator("pre.output")).to_have_text(f"{SCRIPT}{IMAGE}")
    for text in (SCRIPT, IMAGE, LINK, SVG):
        expect(main.get_by_text(text, exact=True).first).to_be_visible()
    # Nothing the record holds became an element, a link target, or ran.
    assert main.locator("script, img, svg, iframe").count() == 0
    hrefs = main.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    # The page's own links only: back to the log, and the record (by its id) into the
    # playground.
    assert hrefs == ["#/requests", "#/playground?request=req_console_0001"]
    assert page.evaluate("window.pwned") is None
    assert console.errors == []


def test_markup_in_prompts_runs_and_analytics_is_shown_as_text(
    console: Console,
    log: Callable[..., None],
    client: httpx.Client,
    openai_stub: OpenAIStub,
) -> None:
    template = f"{SCRIPT} Greet {{name}} {IMAGE}"
    created = client.post(
        "/v1/prompts",
        json={"name": "markup", "template": template, "model": "gpt-4o-mini",
              "description": LINK, "tags": [SVG]},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    openai_stub.script.reply = f"{IMAGE} {LINK}"
    log(record(1, prompt_name=SCRIPT, metadata={"team": IMAGE}))

    page = console.sign_in(route="#/prompts")
    expect(page.locator("table.records tbody tr")).to_contain_text(LINK)
    page.get_by_role("link", name="markup").click()
    expect(page.locator("pre.template")).to_have_text(template)
    run = page.get_by_role("form", name="Run this prompt")
    run.get_by_label("name").fill(SVG)
    run.get_by_role("button", name="Run").click()
    expect(run.locator("pre.run-output")).to_have_text(f"{IMAGE} {LINK}")

    page.goto(f"{console.url}/#/analytics?group_by=metadata&meta_key=team")
    expect(page.locator("section.metric-cost .bar-name")).to_contain_text([IMAGE])
    page.goto(f"{console.url}/#/analytics?group_by=prompt_name")
    expect(page.locator("section.metric-cost .bar-name")).to_contain_text([SCRIPT])

    assert page.locator("main").locator("script, img, iframe").count() == 0
    assert page.evaluate("window.pwned") is None
    assert console.errors == []
