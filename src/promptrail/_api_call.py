"""One API call as data: what to send and how to read the answer.

The resources build a :class:`Call` for each method once; the sync and async transports send it.
So the wire format of every endpoint is written one time, whichever client runs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel
from pydantic import ValidationError as ShapeError
from pydantic_core import to_jsonable_python

from ._errors import PromptrailError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# httpx's own query-parameter shape (the list is invariant, so spell it out).
Params = list[tuple[str, str | int | float | bool | None]]
DateLike = str | date | datetime


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request to make and the parser of its successful answer.

    ``body`` is the JSON body (``None``: no body). Only GETs are retried.
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Params | None = None
    body: Any = None

    @property
    def retryable(self) -> bool:
        """Whether sending again cannot do harm."""
        return self.method == "GET"


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: its items and the cursor of the next page, if any."""

    items: list[T]
    next_cursor: str | None


def segment(value: str | int) -> str:
    """Quote a path segment (names may hold Unicode letters, dots and dashes)."""
    return quote(str(value), safe="")


def prompt_path(name: str, *rest: str | int) -> str:
    """Return ``/v1/prompts/{name}/...``."""
    return "/".join(["/v1/prompts", segment(name), *(segment(part) for part in rest)])


def jsonable(value: Any) -> Any:
    """Turn datetimes, models and the like into JSON values."""
    return to_jsonable_python(value)


def params(**values: Any) -> Params:
    """Return query parameters, leaving out ``None`` and repeating list values."""
    pairs: Params = []
    for key, value in values.items():
        if value is None:
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            pairs.append((key, _param_text(item)))
    return pairs


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date | datetime):
        return value.isoformat()
    return str(value)


def metadata_params(metadata: Mapping[str, Any] | None) -> Params:
    """Return a metadata filter as ``metadata.<key>=<value>`` parameters."""
    return [(f"metadata.{key}", _param_text(value)) for key, value in (metadata or {}).items()]


def body_of(**fields: Any) -> dict[str, Any]:
    """Return a JSON body of the fields that are not ``None``."""
    return {key: jsonable(value) for key, value in fields.items() if value is not None}


def read_json(response: httpx.Response) -> Any:
    """Return the answer's JSON, or raise if the answer is not JSON."""
    try:
        return response.json()
    except ValueError as exc:
        raise _bad_answer(response, "the answer is not JSON") from exc


def _bad_answer(response: httpx.Response, why: str) -> PromptrailError:
    return PromptrailError(
        f"Unexpected answer from {response.request.url}: {why}",
        status=response.status_code,
        code="INVALID_RESPONSE",
    )


def _validate(response: httpx.Response, model: type[M], value: Any) -> M:
    try:
        return model.model_validate(value)
    except ShapeError as exc:
        raise _bad_answer(response, f"not a {model.__name__}: {exc}") from exc


def _data(response: httpx.Response) -> Any:
    document = read_json(response)
    if not isinstance(document, dict) or "data" not in document:
        raise _bad_answer(response, "no 'data' field")
    return document["data"]


def data_of(model: type[M]) -> Callable[[httpx.Response], M]:
    """Return a parser of ``{"data": <model>}``."""
    return lambda response: _validate(response, model, _data(response))


def data_list_of(model: type[M]) -> Callable[[httpx.Response], list[M]]:
    """Return a parser of ``{"data": [<model>, ...]}``."""

    def parse(response: httpx.Response) -> list[M]:
        items = _data(response)
        if not isinstance(items, list):
            raise _bad_answer(response, "'data' is not a list")
        return [_validate(response, model, item) for item in items]

    return parse


def page_of(model: type[M]) -> Callable[[httpx.Response], Page[M]]:
    """Return a parser of ``{"data": [...], "pagination": {"next_cursor": ...}}``."""
    items_of = data_list_of(model)

    def parse(response: httpx.Response) -> Page[M]:
        pagination = read_json(response).get("pagination") or {}
        return Page(items_of(response), pagination.get("next_cursor") or None)

    return parse


def unwrapped(model: type[M]) -> Callable[[httpx.Response], M]:
    """Return a parser of a bare ``<model>`` (the template payload is not wrapped)."""
    return lambda response: _validate(response, model, read_json(response))


def content(response: httpx.Response) -> bytes:
    """Return the answer's bytes."""
    return response.content


def filters_text(filters: Mapping[str, Any] | None) -> str | None:
    """Return analytics filters as the JSON text the query parameter carries."""
    return None if filters is None else json.dumps(jsonable(dict(filters)))
