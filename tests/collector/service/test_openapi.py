"""``/docs`` and ``/openapi.json`` describe what the collector really does."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings

SPEC_ROUTES = [
    ("post", "/v1/prompts", "PromptCreate", "201"),
    ("get", "/v1/prompts", None, "200"),
    ("get", "/v1/prompts/{name}", None, "200"),
    ("patch", "/v1/prompts/{name}", "PromptUpdate", "200"),
    ("delete", "/v1/prompts/{name}", None, "200"),
    ("get", "/v1/prompts/{id}/template", None, "200"),
    ("get", "/v1/prompts/{id}/versions/{version}/template", None, "200"),
    ("get", "/v1/prompts/{id}/versions/by-label/{label}/template", None, "200"),
    ("get", "/v1/prompts/{name}/versions", None, "200"),
    ("get", "/v1/prompts/{name}/versions/{version}", None, "200"),
    ("post", "/v1/prompts/{name}/rollback", "RollbackRequest", "200"),
    ("get", "/v1/prompts/{name}/labels", None, "200"),
    ("put", "/v1/prompts/{name}/labels/{label}", "LabelMove", "200"),
    ("delete", "/v1/prompts/{name}/labels/{label}", None, "200"),
]


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The document the collector serves at ``/openapi.json``, fetched once for the module.

    Its tests only read it, and the app builds it from its routes alone, so it is served
    without the store opened (no lifespan); a collector per test cost a store each and the
    document built anew, about 1 s a test on the loaded 2-core machine.
    """
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("openapi")))
    client = TestClient(app)
    try:
        response = client.get("/openapi.json")
    finally:
        client.close()
    assert response.status_code == 200, response.text
    schema: dict[str, Any] = response.json()
    return schema


class _References(HTMLParser):
    """Collect every URL a page loads or links to: src and href attributes, script URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [
            value for name, value in attrs if name in ("src", "href", "spec-url") and value
        ]

    def handle_data(self, data: str) -> None:
        # Swagger UI is started by an inline script naming the document and its redirect page.
        self.urls += [
            part.split("'")[1]
            for part in data.split("\n")
            if part.strip().startswith(("url:", "oauth2RedirectUrl:")) and "'" in part
        ]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_reference_loads_only_assets_the_collector_serves(api: TestClient, page: str) -> None:
    response = api.get(page)
    assert response.status_code == 200
    parser = _References()
    parser.feed(response.text)

    assert "://" not in response.text, "the page names an absolute URL"
    assert any(url.endswith(".js") for url in parser.urls), parser.urls
    assert "/openapi.json" in parser.urls
    for url in parser.urls:
        absolute = urljoin(f"http://testserver{page}", url)
        assert urlsplit(absolute).netloc == "testserver", f"{page} loads {url} from elsewhere"
        assert api.get(absolute).status_code == 200, url


@pytest.mark.parametrize(("method", "path", "body", "status"), SPEC_ROUTES)
def test_every_route_documents_its_models_and_real_statuses(
    openapi: dict[str, Any], method: str, path: str, body: str | None, status: str
) -> None:
    operation = openapi["paths"][path][method]

    responses = operation["responses"]
    assert status in responses
    assert "$ref" in responses[status]["content"]["application/json"]["schema"]
    assert "422" not in responses
    assert responses["400"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorBody")
    assert {next(iter(s)) for s in operation["security"]} == {"HTTPBearer", "APIKeyHeader"}
    if body:
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith(f"/{body}")


def test_no_framework_validation_schema_is_advertised(openapi: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    assert not any(p.startswith("/v1/admin") for p in openapi["paths"])
