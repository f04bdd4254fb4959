"""Walking a list of the request log page by page, as a client does."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from fastapi.testclient import TestClient


def pages(api: TestClient, limit: int, **params: Any) -> Iterator[list[str]]:
    """The ids of each page of a list, in order, through the cursors."""
    cursor = None
    while True:
        query = {"limit": limit, **params}
        if cursor:
            query["cursor"] = cursor
        response = api.get("/v1/requests", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["data"]) <= limit
        yield [r["id"] for r in body["data"]]
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return


def walk(api: TestClient, limit: int, **params: Any) -> list[str]:
    """Every id of a list, page by page through the cursors."""
    return [id_ for page in pages(api, limit, **params) for id_ in page]


def walk_while_writing(
    api: TestClient, limit: int, new_record: Callable[[int], dict[str, Any]], **params: Any
) -> list[str]:
    """Every id of a list, walked while a thread posts ``new_record(n)`` (up to 200 of them).

    The writer starts once the first page is read, so each later page is read while records
    newer than the walk's position keep arriving.
    """
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 200:
            api.post("/v1/requests", json=new_record(n))
            n += 1

    background = threading.Thread(target=writer)
    seen: list[str] = []
    try:
        for page in pages(api, limit, **params):
            seen += page
            if background.ident is None:
                background.start()
    finally:
        stop.set()
        if background.ident is not None:
            background.join()
    return seen
