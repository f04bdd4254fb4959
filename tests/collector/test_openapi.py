"""``/docs`` and ``/openapi.json`` describe what the collector really does."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

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


@pytest.fixture
def openapi(api: TestClient) -> dict[str, Any]:
    schema: dict[str, Any] = api.get("/openapi.json").json()
    return schema


def test_docs_page_is_served(api: TestClient) -> None:
    response = api.get("/docs")

    assert response.status_code == 200
    assert "swagger" in response.text.lower()


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
