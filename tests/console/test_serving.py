"""The collector serves the console at ``/``: its own files only, under a strict CSP."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from fastapi.testclient import TestClient

from promptrail.collector.console import STATIC_DIR


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "script" and not values.get("src"):
            self.inline_scripts += 1


def test_root_serves_the_console_under_a_strict_content_security_policy(api: TestClient) -> None:
    response = api.get("/", follow_redirects=False)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_page_loads_only_the_collectors_own_files(api: TestClient) -> None:
    page = api.get("/")
    parser = _References()
    parser.feed(page.text)

    assert parser.inline_scripts == 0
    assert "://" not in page.text, "the page names another origin"
    scripts = [url for url in parser.urls if url.endswith(".js")]
    assert scripts == ["/console/app.js"]
    for url in parser.urls:
        if url.startswith("/console/"):
            response = api.get(url)
            assert response.status_code == 200, url
            assert "script-src 'self'" in response.headers["content-security-policy"]
    assert api.get("/console/app.js").headers["content-type"].startswith("text/javascript")


def test_the_api_reference_and_the_api_stay_where_they_were(api: TestClient) -> None:
    assert api.get("/docs").status_code == 200
    assert api.get("/v1/requests").status_code == 200
    assert api.get("/api/v1/requests").status_code == 200


def test_no_console_script_can_parse_markup_or_evaluate_text() -> None:
    # Record data reaches the page only as text nodes; these are the doors that would let
    # it in as markup or code, and none of the console's modules opens one.
    doors = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"createContextualFragment|DOMParser|srcdoc"
    )
    for script in sorted(STATIC_DIR.glob("*.js")):
        found = doors.findall(script.read_text())
        assert found == [], f"{script.name} uses {found}"


def test_no_console_script_unescapes_markup_from_the_api() -> None:
    # Search highlights arrive as text runs ({text, match}); a module that turns entities back
    # into characters would be reading markup the API wrote (issue 29.8).
    entities = re.compile(r"&(?:amp|lt|gt|quot|#x27|#39);|<\\?/?em>")
    for script in sorted(STATIC_DIR.glob("*.js")):
        found = entities.findall(script.read_text())
        assert found == [], f"{script.name} handles {found}"
