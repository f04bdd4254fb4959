"""Search (spec 2.6): matches in input variables, output, metadata and input; highlights."""

from __future__ import annotations

import html
from typing import Any

import pytest
from fastapi.testclient import TestClient


def log(api: TestClient, **fields: Any) -> str:
    response = api.post("/v1/requests", json={"prompt_name": "p", **fields})
    assert response.status_code == 201, response.text
    request_id: str = response.json()["data"]["id"]
    return request_id


def search(api: TestClient, query: str, **params: Any) -> dict[str, Any]:
    response = api.get("/v1/requests/search", params={"query": query, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_matches_every_field_kind_with_dotted_paths(api: TestClient) -> None:
    request_id = log(
        api,
        input_variables={"city": "Lisbon", "count": 3},
        output={"content": "Weather in lisbon: sunny", "summary": "LISBON trip"},
        metadata={"user_id": "from-lisbon"},
        input=[{"role": "user", "content": "Tell me about Lisbon"}],
    )
    log(api, input_variables={"city": "Porto"}, output="Porto is rainy")

    hits = search(api, "lisbon")["data"]

    assert [h["id"] for h in hits] == [request_id]
    assert hits[0]["prompt_name"] == "p"
    assert hits[0]["matched_fields"] == [
        "input_variables.city",
        "output",
        "output.summary",
        "metadata.user_id",
        "input.0.content",
    ]
    assert hits[0]["highlights"] == {
        "input_variables.city": "<em>Lisbon</em>",
        "output": "Weather in <em>lisbon</em>: sunny",
        "output.summary": "<em>LISBON</em> trip",
        "metadata.user_id": "from-<em>lisbon</em>",
        "input.0.content": "Tell me about <em>Lisbon</em>",
    }


def test_highlights_escape_html_and_mark_every_match(api: TestClient) -> None:
    log(api, output='<script>alert("x")</script> ab AB aB & <b>ab</b>')

    hit = search(api, "ab")["data"][0]

    assert hit["highlights"]["output"] == (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; <em>ab</em> <em>AB</em> <em>aB</em>"
        " &amp; &lt;b&gt;<em>ab</em>&lt;/b&gt;"
    )


def test_highlight_runs_are_the_same_snippet_as_plain_text(api: TestClient) -> None:
    log(api, output="<b>ab</b> & AB", metadata={"note": "x" * 400 + " ab " + "y" * 400})

    hit = search(api, "ab")["data"][0]

    assert hit["highlight_runs"]["output"] == [
        {"text": "<b>", "match": False},
        {"text": "ab", "match": True},
        {"text": "</b> & ", "match": False},
        {"text": "AB", "match": True},
    ]
    assert list(hit["highlight_runs"]) == hit["matched_fields"] == ["output", "metadata.note"]
    # Each snippet's runs, escaped and with the matches in <em>, are its highlight.
    for path, runs in hit["highlight_runs"].items():
        rebuilt = "".join(
            f"<em>{html.escape(r['text'])}</em>" if r["match"] else html.escape(r["text"])
            for r in runs
        )
        assert rebuilt == hit["highlights"][path]
    cut = hit["highlight_runs"]["metadata.note"]
    assert cut[0]["text"].startswith("…") and cut[-1]["text"].endswith("…")
    assert [r["text"] for r in cut if r["match"]] == ["ab"]


def test_long_texts_are_cut_to_a_window_around_the_first_match(api: TestClient) -> None:
    text = "x" * 1000 + " needle " + "y" * 1000
    log(api, output=text)

    snippet = search(api, "needle")["data"][0]["highlights"]["output"]

    assert snippet.startswith("…") and snippet.endswith("…")
    assert "<em>needle</em>" in snippet
    assert len(snippet) < 400


@pytest.mark.parametrize("query", ["100%", "a_b", "back\\slash", "'; DROP TABLE requests; --"])
def test_special_characters_match_literally(api: TestClient, query: str) -> None:
    wanted = log(api, output=f"literal {query} here")
    log(api, output="literal 100x a-b backslash nothing")

    hits = search(api, query)["data"]

    assert [h["id"] for h in hits] == [wanted]


def test_newest_first_with_cursor_pages(api: TestClient) -> None:
    logged = [
        log(api, output=f"match {i}", created_at=f"2026-02-{i + 1:02d}T00:00:00Z") for i in range(7)
    ]

    first = search(api, "match", limit=3)
    second = search(api, "match", limit=3, cursor=first["pagination"]["next_cursor"])
    third = search(api, "match", limit=3, cursor=second["pagination"]["next_cursor"])

    walked = [h["id"] for page in (first, second, third) for h in page["data"]]
    assert walked == list(reversed(logged))
    assert third["pagination"] == {"has_more": False}


def test_no_match_is_an_empty_page(api: TestClient) -> None:
    log(api, output="something")

    assert search(api, "absent") == {"data": [], "pagination": {"has_more": False}}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "cursor": "forged"}, "cursor"),
    ],
)
def test_bad_search_parameters(api: TestClient, params: dict[str, Any], field: str) -> None:
    response = api.get("/v1/requests/search", params=params)

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == field


def test_a_list_cursor_is_not_a_search_cursor(api: TestClient) -> None:
    for i in range(3):
        log(api, output=f"match {i}")
    list_cursor = api.get("/v1/requests", params={"limit": 1}).json()["pagination"]["next_cursor"]

    response = api.get("/v1/requests/search", params={"query": "match", "cursor": list_cursor})

    assert response.status_code == 400
