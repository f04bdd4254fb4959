"""One rule for names and labels in paths, and PATCH never takes null for a version's field."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.collector.contract import assert_error
from tests.collector.service.hostile_input import BAD_LABELS, CONTROL, labels, versions


@pytest.fixture
def control(api: TestClient) -> dict[str, Any]:
    response = api.post("/v1/prompts", json=CONTROL)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.mark.parametrize(
    "field", ["template", "model", "description", "parameters", "tags", "name"]
)
def test_patch_with_null_for_a_version_field_is_refused_and_changes_nothing(
    api: TestClient, control: dict[str, Any], field: str
) -> None:
    response = api.patch("/v1/prompts/control", json={field: None})

    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert [v["version"] for v in versions(api, "control")] == [1]
    got = api.get("/v1/prompts/control").json()["data"]
    assert (got["template"], got["model"]) == (CONTROL["template"], CONTROL["model"])


def test_patch_with_null_alongside_a_real_change_makes_no_version(
    api: TestClient, control: dict[str, Any]
) -> None:
    response = api.patch("/v1/prompts/control", json={"template": "New {x}", "model": None})

    assert_error(response, 400, "VALIDATION_ERROR", "model")
    assert [v["version"] for v in versions(api, "control")] == [1]


def test_patch_with_null_folder_still_clears_the_folder(
    api: TestClient, control: dict[str, Any]
) -> None:
    response = api.patch("/v1/prompts/control", json={"folder": None})

    assert response.status_code == 200, response.text
    assert [v["version"] for v in versions(api, "control")] == [2, 1]


def _label_lookups(label: str) -> list[tuple[str, str]]:
    segment = quote(label, safe="")
    return [
        ("GET", f"/v1/prompts/control/versions/by-label/{segment}/template"),
        ("POST", f"/v1/prompts/control/versions/by-label/{segment}/run"),
        ("DELETE", f"/v1/prompts/control/labels/{segment}"),
    ]


@pytest.mark.parametrize("label", [*BAD_LABELS, "staging"])
def test_a_label_that_is_not_attached_is_label_not_found_on_every_lookup_path(
    api: TestClient, control: dict[str, Any], label: str
) -> None:
    for method, path in _label_lookups(label):
        response = api.request(method, path)

        assert_error(response, 404, "LABEL_NOT_FOUND")
        details = response.json()["error"]["details"]
        assert (details["prompt_name"], details["label"]) == ("control", label), path
    assert labels(api, "control") == {"production": 1}


@pytest.mark.parametrize("label", BAD_LABELS)
def test_a_label_outside_the_charset_on_a_missing_prompt_is_prompt_not_found(
    api: TestClient, label: str
) -> None:
    for method, path in _label_lookups(label):
        response = api.request(method, path.replace("/control/", "/nothing/"))

        assert_error(response, 404, "PROMPT_NOT_FOUND")


@pytest.mark.parametrize("label", BAD_LABELS)
def test_setting_a_label_outside_the_charset_is_a_validation_error(
    api: TestClient, control: dict[str, Any], label: str
) -> None:
    response = api.put(f"/v1/prompts/control/labels/{quote(label, safe='')}", json={"version": 1})

    assert_error(response, 400, "VALIDATION_ERROR", "label")
    assert labels(api, "control") == {"production": 1}


def test_latest_cannot_be_set_or_removed(api: TestClient, control: dict[str, Any]) -> None:
    for response in (
        api.put("/v1/prompts/control/labels/latest", json={"version": 1}),
        api.delete("/v1/prompts/control/labels/latest"),
    ):
        assert_error(response, 400, "VALIDATION_ERROR", "label")
    assert labels(api, "control") == {"production": 1}
