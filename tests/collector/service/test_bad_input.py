"""Hostile input never gets a 500 and never leaves anything stored half-way."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.collector.contract import assert_error
from tests.collector.service.hostile_input import BAD_LABELS, CONTROL, labels, versions

MIB = 1024 * 1024


def listing(api: TestClient, **params: Any) -> tuple[list[str], int]:
    """Return (names on the first page, pagination.total) of the prompt list."""
    response = api.get("/v1/prompts", params={"limit": 100, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    return [item["name"] for item in body["data"]], body["pagination"]["total"]


def listed(api: TestClient, **params: Any) -> list[str]:
    return sorted(listing(api, **params)[0])


def create(api: TestClient, **fields: Any) -> Any:
    body = {"template": "Hello {name}", "model": "gpt-4o", **fields}
    response = api.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def assert_control_untouched(api: TestClient) -> None:
    """The control prompt still has exactly one version, its fields and its label."""
    history = versions(api, "control")
    assert [v["version"] for v in history] == [1]
    one = api.get("/v1/prompts/control/versions/1").json()["data"]
    assert one["template"] == CONTROL["template"]
    assert one["model"] == CONTROL["model"]
    assert one["parameters"] == CONTROL["parameters"]
    assert labels(api, "control") == {"production": 1}


@pytest.fixture
def control(api: TestClient) -> Any:
    """One stored prompt, so that "nothing was stored" is measured against a non-empty list."""
    return create(api, **CONTROL)


def refused_create(api: TestClient, body: dict[str, Any], field: str) -> None:
    """A create that must fail naming ``field`` and leave the list as it was."""
    before = listing(api)
    response = api.post("/v1/prompts", json=body)
    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert listing(api) == before


# -- names ---------------------------------------------------------------------------------

BAD_NAMES: dict[str, list[str]] = {
    "length": ["", "x" * 129, "日" * 129],
    "id-shaped": ["prompt_" + "0" * 32, "prompt_0123456789abcdef0123456789abcdef"],
    "slashes": ["a/b", "/leading-slash", "trailing-slash/", ".", ".."],
    "spaces": ["a b", " leading-space", "trailing-space ", "nbsp\u00a0x"],
    "control-chars": [
        "tab\there",
        "new\nline",
        "\nleading-newline",
        "carriage\r",
        "nul\x00byte",
        "bell\x07",
        "del\x7f",
    ],
    "trailing-newline": ["trailing-newline\n", "x" * 128 + "\n"],
    "invisible-and-emoji": ["zero\u200bwidth", "rtl\u202eoverride", "😀", "emoji😀"],
    "punctuation": [
        "-leading-dash",
        ".leading-dot",
        "semi;colon",
        "quote'",
        'double"quote',
        "back`tick",
        "{brace}",
        "percent%20",
        "question?",
        "hash#",
    ],
}


@pytest.mark.parametrize("kind", list(BAD_NAMES))
def test_a_hostile_name_is_refused_and_nothing_is_stored(
    api: TestClient, control: Any, kind: str
) -> None:
    for name in BAD_NAMES[kind]:
        before = listing(api)

        response = api.post(
            "/v1/prompts", json={"name": name, "template": "Hello {x}", "model": "gpt-4o"}
        )

        assert response.status_code == 400, (name, response.text)
        assert_error(response, 400, "VALIDATION_ERROR", "name")
        assert listing(api) == before, name

    assert listed(api) == ["control"]
    assert_control_untouched(api)


def assert_name_round_trips(api: TestClient, name: str) -> None:
    created = create(api, name=name)

    assert created["name"] == name
    for ref in (quote(name, safe=""), created["id"]):
        fetched = api.get(f"/v1/prompts/{ref}")
        assert fetched.status_code == 200, fetched.text
        assert fetched.json()["data"]["name"] == name
        payload = api.get(f"/v1/prompts/{ref}/template")
        assert payload.status_code == 200, payload.text
        assert payload.json()["prompt_name"] == name
    assert listed(api, search=name) == [name]


def test_names_in_any_script_round_trip_exactly(api: TestClient) -> None:
    good = [
        "日本語のプロンプト",
        "한국어",
        "Ελληνικά",
        "שלום-עולם",
        "مرحبا_بالعالم",
        "café",
        "Ünïcödé_name.v2",
        "_underscore",
        "x" * 128,
        "日" * 128,
    ]
    for name in good:
        assert_name_round_trips(api, name)

    assert sorted(listed(api)) == sorted(good)


@pytest.mark.parametrize(
    "name",
    [
        "नमस्ते",  # Devanagari: vowel signs and the virama are combining marks
        "cafe\u0301",  # decomposed: e + COMBINING ACUTE ACCENT
        "สวัสดี",  # Thai: vowel and tone marks are combining marks
    ],
)
def test_names_with_combining_marks_round_trip_exactly(api: TestClient, name: str) -> None:
    # docs/api-notes.md: names are letters (Unicode included); these words are letters.
    assert_name_round_trips(api, name)


# -- templates -----------------------------------------------------------------------------


@pytest.mark.parametrize("char", ["x", "é", "日", "😀"])
def test_a_template_over_one_mib_of_characters_is_refused(
    api: TestClient, control: Any, char: str
) -> None:
    template = char * (MIB + 1)

    refused_create(api, {"name": "huge", "template": template, "model": "gpt-4o"}, "template")
    response = api.patch("/v1/prompts/control", json={"template": template})

    assert_error(response, 400, "VALIDATION_ERROR", "template")
    assert listed(api) == ["control"]
    assert_control_untouched(api)


@pytest.mark.parametrize("char", ["x", "é", "😀"])
def test_a_template_of_exactly_one_mib_round_trips_intact(api: TestClient, char: str) -> None:
    head = "Start {name} {{literal}} "
    template = head + char * (MIB - len(head) - len(" end {last}")) + " end {last}"
    assert len(template) == MIB
    patched = "P {other} " + char * (MIB - 10)
    assert len(patched) == MIB

    created = create(api, name="big", template=template)

    assert created["template"] == template
    assert api.get("/v1/prompts/big").json()["data"]["template"] == template
    assert api.get("/v1/prompts/big/versions/1").json()["data"]["template"] == template
    payload = api.get("/v1/prompts/big/template").json()
    assert payload["content"] == (
        "Start {{name}} {literal} " + char * (MIB - len(head) - 11) + " end {{last}}"
    )
    assert payload["variables"] == {"name": {"type": "string"}, "last": {"type": "string"}}

    response = api.patch("/v1/prompts/big", json={"template": patched})

    assert response.status_code == 200, response.text
    assert response.json()["data"]["template"] == patched
    assert api.get("/v1/prompts/big/versions/2").json()["data"]["template"] == patched
    assert api.get("/v1/prompts/big/versions/1").json()["data"]["template"] == template


def test_control_characters_in_text_round_trip(api: TestClient) -> None:
    text = "a\x00b\x01c\r\nd\te\x7ff\x1b[31mred\x1b[0m\u2028\u2029"
    template = text + " {var}"

    created = create(api, name="controls", template=template, description=text, tags=["t\x00t"])

    assert created["template"] == template
    assert created["description"] == text
    assert created["tags"] == ["t\x00t"]
    assert api.get("/v1/prompts/controls").json()["data"]["template"] == template
    payload = api.get("/v1/prompts/controls/template").json()
    assert payload["content"] == text + " {{var}}"
    items = api.get("/v1/prompts").json()["data"]
    assert [i["description"] for i in items] == [text]


# -- unicode everywhere --------------------------------------------------------------------

UNICODE_TEMPLATE = (
    "こんにちは {name} 👋🏽 — مرحبا {name}! שלום\u200f e\u0301 👩\u200d👩\u200d👧 "
    "{{literal}} \u202eRTL\u202c \U0001f600 ﷽ "
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522"
)
UNICODE_DESCRIPTION = "Ελληνικά · 中文 · עברית · a\u0301\u0302 · 🏳️\u200d🌈 · \u0000 · \U0001d7d8"
UNICODE_TAGS = ["日本語", "emoji🎉", "עברית", "e\u0301", "👩\u200d👩\u200d👧"]
UNICODE_FOLDER = "/チーム/プロジェクト"


def test_unicode_round_trips_in_template_description_tags_and_folder(
    api: TestClient, control: Any
) -> None:
    created = create(
        api,
        name="unicode",
        template=UNICODE_TEMPLATE,
        description=UNICODE_DESCRIPTION,
        tags=UNICODE_TAGS,
        folder=UNICODE_FOLDER,
    )

    assert created["template"] == UNICODE_TEMPLATE
    assert created["description"] == UNICODE_DESCRIPTION
    assert created["tags"] == UNICODE_TAGS
    assert created["folder"] == UNICODE_FOLDER
    assert api.get("/v1/prompts/unicode").json()["data"]["template"] == UNICODE_TEMPLATE
    assert api.get("/v1/prompts/unicode/versions/1").json()["data"]["template"] == (
        UNICODE_TEMPLATE
    )
    items = {i["name"]: i for i in api.get("/v1/prompts").json()["data"]}
    assert items["unicode"]["description"] == UNICODE_DESCRIPTION
    payload = api.get("/v1/prompts/unicode/template").json()
    assert payload["content"] == (
        UNICODE_TEMPLATE.replace("{name}", "{{name}}").replace("{{literal}}", "{literal}")
    )
    assert payload["variables"] == {"name": {"type": "string"}}
    for tag in UNICODE_TAGS:
        assert listed(api, tags=tag) == ["unicode"], tag
    assert listed(api, folder=UNICODE_FOLDER) == ["unicode"]
    assert listed(api, folder="/チーム") == ["unicode"]
    assert listed(api, search="中文") == ["unicode"]
    assert listed(api, search="עברית") == ["unicode"]

    new_description = UNICODE_DESCRIPTION[::-1]
    response = api.patch("/v1/prompts/unicode", json={"description": new_description})

    assert response.status_code == 200, response.text
    items = {i["name"]: i for i in api.get("/v1/prompts").json()["data"]}
    assert items["unicode"]["description"] == new_description
    assert_control_untouched(api)


@pytest.mark.parametrize("field", ["template", "description", "model"])
def test_a_lone_surrogate_is_refused_naming_the_field(
    api: TestClient, control: Any, field: str
) -> None:
    body = {"name": "surrogate", "template": "t", "model": "gpt-4o", field: "x\\ud800y"}
    raw = "{" + ", ".join(f'"{k}": "{v}"' for k, v in body.items()) + "}"
    before = listing(api)

    response = api.post(
        "/v1/prompts", content=raw.encode(), headers={"Content-Type": "application/json"}
    )

    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert listing(api) == before


# -- SQL-injection-like text -----------------------------------------------------------------

INJECTIONS = [
    "'; DROP TABLE prompts; --",
    "\\' OR 1=1 --",
    "' OR '1'='1",
    "{x:String}",
    "{project:String}",
    "`prompts`",
    "`; DROP DATABASE default; --",
    '" OR ""="',
    "%' OR 1=1 --",
    "\\",
    "'",
    "Robert'); DROP TABLE students;--",
    "1; SELECT * FROM system.tables",
    "$1 ? :name @p0",
]


def _escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_like_text_is_stored_verbatim_and_breaks_nothing(
    api: TestClient, control: Any, text: str
) -> None:
    template = _escape_braces(text) + " {var}"

    created = create(
        api, name="injected", template=template, description=text, tags=[text], folder="/" + text
    )

    assert created["template"] == template
    assert created["description"] == text
    assert created["tags"] == [text]
    assert created["folder"] == "/" + text
    assert api.get("/v1/prompts/injected").json()["data"]["template"] == template
    assert api.get("/v1/prompts/injected/template").json()["content"] == text + " {{var}}"
    assert listed(api) == ["control", "injected"]
    assert listing(api)[1] == 2
    assert listed(api, search=text) == ["injected"]
    assert listed(api, folder=text) == ["injected"]
    assert listed(api, folder="/" + text) == ["injected"]
    assert listed(api, tags=text) == ["injected"]

    missing = api.get(f"/v1/prompts/{quote(text, safe='')}")
    assert_error(missing, 404, "PROMPT_NOT_FOUND")
    assert missing.json()["error"]["details"]["prompt_name"] == text

    create(api, name="after")
    assert listed(api) == ["after", "control", "injected"]
    assert_control_untouched(api)


def test_injection_like_query_params_match_nothing_and_fail_nothing(
    api: TestClient, control: Any
) -> None:
    for text in INJECTIONS:
        for params in ({"search": text}, {"folder": text}, {"tags": text}):
            assert listing(api, **params) == ([], 0), params
    assert listing(api) == (["control"], 1)
    assert_control_untouched(api)


def test_search_wildcards_are_literal(api: TestClient) -> None:
    create(api, name="alpha", description="plain")
    create(api, name="beta_two", description="100% sure")

    assert listed(api, search="%") == ["beta_two"]
    assert listed(api, search="_") == ["beta_two"]
    assert listed(api, search="a%") == []
    assert listed(api, search="_t") == ["beta_two"]
    assert listed(api, search="*") == []
    assert listed(api, search=".*") == []


def test_hostile_paths_and_query_strings_are_never_a_500(api: TestClient, control: Any) -> None:
    for path in (
        "/v1/prompts/%00",
        "/v1/prompts/%FF",
        "/v1/prompts/%ED%A0%80",
        "/v1/prompts/%C0%AF",
        "/v1/prompts/" + "x" * 5000,
        "/v1/prompts/prompt_" + "A" * 32,
        "/v1/prompts/%27%3B%20DROP%20TABLE%20prompts%3B%20--",
        "/v1/prompts/control%00",
        "/v1/prompts/control%0A",
    ):
        response = api.get(path)
        assert_error(response, 404, "PROMPT_NOT_FOUND")
        response = api.get(path + "/versions")
        assert_error(response, 404, "PROMPT_NOT_FOUND")

    for query in ("search=%FF", "folder=%FF", "tags=%FF", "search=%00", "tags=%ED%A0%80"):
        response = api.get("/v1/prompts?" + query)
        assert response.status_code == 200, (query, response.text)
        assert response.json()["data"] == []

    assert_error(api.get("/v1/prompts", params={"search": "x" * 201}), 400, "VALIDATION_ERROR")
    assert_error(
        api.get("/v1/prompts", params={"folder": "/" + "x" * 300}), 400, "VALIDATION_ERROR"
    )
    assert_control_untouched(api)


# -- other field values --------------------------------------------------------------------

BAD_VALUES: dict[str, list[Any]] = {
    "tags": [
        [""],
        [" padded"],
        ["padded "],
        ["x" * 65],
        [f"t{i}" for i in range(51)],
        [None],
    ],
    "folder": ["/a/../b", "/./a", "/" + "x" * 300],
    "description": ["d" * 10_001],
    "model": ["", "m" * 201],
    "template": [""],
    "labels": [
        ["latest"],
        ["bad label"],
        [""],
        ["x" * 65],
        ["-leading"],
        ["ok", "'; DROP TABLE prompt_labels; --"],
        [f"l{i}" for i in range(21)],
    ],
}


@pytest.mark.parametrize("field", list(BAD_VALUES))
def test_a_bad_field_value_is_refused_on_create_and_patch(
    api: TestClient, control: Any, field: str
) -> None:
    for value in BAD_VALUES[field]:
        body = {"name": "valued", "template": "Hello {x}", "model": "gpt-4o", field: value}
        refused_create(api, body, field)

        patch = {"template": "Patched {x}", field: value}
        response = api.patch("/v1/prompts/control", json=patch)

        assert_error(response, 400, "VALIDATION_ERROR", field)

    assert listed(api) == ["control"]
    assert_control_untouched(api)


BAD_PARAMETERS: list[dict[str, Any]] = [
    {"temperature": "hot"},
    {"temperature": True},
    {"temperature": -1},
    {"temperature": 3},
    {"temperature": 2.0001},
    {"temperature": None},
    {"temperature": "0.5"},
    {"temperature": [0.5]},
    {"max_tokens": 0},
    {"max_tokens": -5},
    {"max_tokens": 1.5},
    {"max_tokens": "10"},
    {"max_tokens": True},
    {"max_tokens": None},
    {"top_p": 1.5},
    {"temperature": 0.5, "max_tokens": 0},
]


def test_parameters_of_the_wrong_type_or_range_are_refused_on_create(
    api: TestClient, control: Any
) -> None:
    for parameters in BAD_PARAMETERS:
        body = {"name": "params", "template": "Hi", "model": "gpt-4o", "parameters": parameters}
        refused_create(api, body, "parameters")

    assert listed(api) == ["control"]


def test_parameters_of_the_wrong_type_or_range_are_refused_on_patch(
    api: TestClient, control: Any
) -> None:
    for parameters in BAD_PARAMETERS:
        response = api.patch("/v1/prompts/control", json={"parameters": parameters})

        assert_error(response, 400, "VALIDATION_ERROR", "parameters")
        message = response.json()["error"]["message"]
        assert any(key in message for key in parameters), message

    assert_control_untouched(api)


@pytest.mark.parametrize(
    "parameters",
    [
        {"temperature": 0, "max_tokens": 1},
        {"temperature": 2, "max_tokens": 1_000_000},
        {"temperature": 0.7, "top_p": 1, "stop": ["\n", "###"], "seed": 7},
        {},
    ],
)
def test_parameters_at_the_bounds_round_trip(api: TestClient, parameters: dict[str, Any]) -> None:
    created = create(api, name="bounds", parameters=parameters)

    assert created["parameters"] == parameters
    assert api.get("/v1/prompts/bounds/versions/1").json()["data"]["parameters"] == parameters
    payload = api.get("/v1/prompts/bounds/template").json()
    assert payload["temperature"] == parameters.get("temperature")
    assert payload["max_tokens"] == parameters.get("max_tokens")


# -- unknown fields and empty bodies -------------------------------------------------------


def test_unknown_fields_are_refused_naming_them(api: TestClient, control: Any) -> None:
    extras: list[dict[str, Any]] = [
        {"id": "prompt_" + "1" * 32},
        {"prompt_id": "x"},
        {"version": 5},
        {"created_at": "2020-01-01T00:00:00Z"},
        {"temperature": 0.5},
        {"Name": "shadow"},
        {"project": "other"},
    ]
    for extra in extras:
        (field,) = extra
        body = {"name": "extra", "template": "Hi", "model": "gpt-4o", **extra}
        refused_create(api, body, field)

        response = api.patch("/v1/prompts/control", json={"template": "New {x}", **extra})

        assert_error(response, 400, "VALIDATION_ERROR", field)

    assert listed(api) == ["control"]
    assert_control_untouched(api)


def test_unknown_fields_on_rollback_and_label_moves_are_refused(
    api: TestClient, control: Any
) -> None:
    response = api.post("/v1/prompts/control/rollback", json={"version": 1, "template": "x"})
    assert_error(response, 400, "VALIDATION_ERROR", "template")

    response = api.put("/v1/prompts/control/labels/staging", json={"version": 1, "force": True})
    assert_error(response, 400, "VALIDATION_ERROR", "force")

    assert_control_untouched(api)


def test_a_patch_that_changes_nothing_is_refused(api: TestClient, control: Any) -> None:
    for body in ({}, {"labels": ["staging"]}):
        response = api.patch("/v1/prompts/control", json=body)
        assert_error(response, 400, "VALIDATION_ERROR")
    for raw in (b"null", b"[]", b'"template"', b"1"):
        response = api.patch(
            "/v1/prompts/control", content=raw, headers={"Content-Type": "application/json"}
        )
        assert_error(response, 400, "VALIDATION_ERROR")

    assert_control_untouched(api)


def test_a_patch_cannot_rename(api: TestClient, control: Any) -> None:
    response = api.patch("/v1/prompts/control", json={"name": "renamed", "template": "R {x}"})

    assert_error(response, 400, "VALIDATION_ERROR", "name")
    assert_error(api.get("/v1/prompts/renamed"), 404, "PROMPT_NOT_FOUND")
    assert listed(api) == ["control"]
    assert_control_untouched(api)


# -- versions and labels -------------------------------------------------------------------


def test_a_bad_version_number_is_refused_on_rollback_and_label_move(
    api: TestClient, control: Any
) -> None:
    for version in (0, -1, "x", 1.5, None, [1], {"n": 1}, 2**40):
        response = api.post("/v1/prompts/control/rollback", json={"version": version})
        assert_error(response, 400, "VALIDATION_ERROR", "version")

        response = api.put("/v1/prompts/control/labels/staging", json={"version": version})
        assert_error(response, 400, "VALIDATION_ERROR", "version")

    assert_control_untouched(api)


@pytest.mark.parametrize("version", [True, False])
def test_a_boolean_is_not_a_version_number(api: TestClient, control: Any, version: bool) -> None:
    response = api.put("/v1/prompts/control/labels/staging", json={"version": version})
    assert_error(response, 400, "VALIDATION_ERROR", "version")

    response = api.post("/v1/prompts/control/rollback", json={"version": version})
    assert_error(response, 400, "VALIDATION_ERROR", "version")

    assert_control_untouched(api)


def test_a_missing_version_is_refused_on_rollback_and_label_move(
    api: TestClient, control: Any
) -> None:
    assert_error(api.post("/v1/prompts/control/rollback", json={}), 400, "VALIDATION_ERROR")
    assert_error(api.put("/v1/prompts/control/labels/staging", json={}), 400, "VALIDATION_ERROR")
    assert_control_untouched(api)


def test_a_hostile_label_name_in_the_path_is_refused(api: TestClient, control: Any) -> None:
    for label in [*BAD_LABELS, "latest"]:
        path = f"/v1/prompts/control/labels/{quote(label, safe='')}"

        response = api.put(path, json={"version": 1})

        assert response.status_code == 400, (label, response.text)
        assert_error(response, 400, "VALIDATION_ERROR", "label")
        assert labels(api, "control") == {"production": 1}, label

    assert_control_untouched(api)


def test_reading_or_removing_a_hostile_label_is_an_error_not_a_500(
    api: TestClient, control: Any
) -> None:
    for label in BAD_LABELS:
        for method, path in (
            ("GET", f"/v1/prompts/control/versions/by-label/{quote(label, safe='')}/template"),
            ("DELETE", f"/v1/prompts/control/labels/{quote(label, safe='')}"),
        ):
            response = api.request(method, path)

            assert response.status_code in (400, 404), (label, response.text)
            assert response.json()["error"]["code"] in ("VALIDATION_ERROR", "LABEL_NOT_FOUND")

    assert_control_untouched(api)
