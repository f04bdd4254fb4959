"""A record full of markup and script shows as characters: nothing of it runs or loads."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import expect

from .conftest import Console
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
    assert hrefs == ["#/requests"]
    assert page.evaluate("window.pwned") is None
    assert console.errors == []
