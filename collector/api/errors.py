"""Turn every failure into the contract's error body, never a framework page."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from clickhouse_connect.driver.exceptions import ClickHouseError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..errors import ContractError, StoreUnavailable, plain_message
from ..store.connection import error_summary, is_store_outage
from .access import enforce
from .cors import is_feedback_path

logger = logging.getLogger("promptrail.api")

_API_PREFIXES = ("/v1/", "/api/v1/")

_HTTP_CODES = {
    400: ("VALIDATION_ERROR", "validation_error"),
    404: ("NOT_FOUND", "not_found_error"),
    405: ("METHOD_NOT_ALLOWED", "invalid_request_error"),
}


def error_response(
    status: int, code: str, type_: str, message: str, **details: Any
) -> JSONResponse:
    """Build the error body response."""
    body = {"error": {"type": type_, "message": message, "code": code, "details": details}}
    return JSONResponse(body, status_code=status)


def contract_response(error: ContractError) -> JSONResponse:
    """The response of a contract error: its body, status and headers (``Retry-After``)."""
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _contract_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ContractError)
    return contract_response(exc)


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    """A ClickHouse failure: 503 when the store is out of reach or overloaded, else a 500."""
    if not is_store_outage(exc):
        raise exc  # a query the store refuses is a bug: the 500 of _unexpected, logged
    logger.warning("store unavailable on %s %s: %s", request.method, request.url.path, exc)
    services = getattr(request.app.state, "services", None)
    retry_after = services.settings.store_retry_after_seconds if services is not None else 2
    return contract_response(
        StoreUnavailable(f"The store is unavailable: {error_summary(exc)}", retry_after=retry_after)
    )


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _unauthenticated(request: Request) -> JSONResponse | None:
    """Answer 401 or 403 when the caller may not call the route, before judging its body.

    FastAPI parses a JSON body before it runs the route's dependencies, so a malformed body
    would otherwise be judged before the key is.
    """
    path = request.url.path
    services = getattr(request.app.state, "services", None)
    if (
        services is None
        or not path.startswith(_API_PREFIXES)
        or "/admin/" in path
        or is_feedback_path(path)  # keyless: its token is its credential
    ):
        return None
    try:
        await enforce(request)  # the route's access check (api/access.py): 401 or 403 first
    except ContractError as failure:
        return JSONResponse(failure.body(), status_code=failure.status, headers=failure.headers)
    return None


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    refused = await _unauthenticated(request)
    if refused is not None:
        return refused
    raw = exc.errors()
    if _body_not_json(request, raw):
        return _not_json(request)
    errors = [
        {
            "field": _field_path(e.get("loc", ())),
            "message": plain_message(str(e.get("msg", ""))),
            "type": e.get("type"),
        }
        for e in raw
    ]
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    if first.get("type") == "json_invalid":
        return _malformed_json(raw[0], exc.body)
    message = f"{first['field']}: {first['message']}"
    return error_response(
        400, "VALIDATION_ERROR", "validation_error", message, field=first["field"], errors=errors
    )


def _body_not_json(request: Request, errors: Sequence[Any]) -> bool:
    """Whether the body was refused because it was not sent as JSON.

    FastAPI reads a body as JSON only under a JSON Content-Type; any other (or none) leaves the
    bytes, which then fail as "not a valid dictionary", a message that hides the fix.
    """
    if not any(tuple(e.get("loc", ()))[:1] == ("body",) for e in errors):
        return False
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return not (media == "application/json" or re.fullmatch(r"application/[^/]+\+json", media))


def _not_json(request: Request) -> JSONResponse:
    sent = request.headers.get("content-type")
    message = (
        "The body must be JSON sent with the header Content-Type: application/json "
        f"({f'Content-Type was {sent}' if sent else 'no Content-Type was sent'})"
    )
    error = {"field": "body", "message": message, "type": "content_type"}
    return error_response(
        400, "VALIDATION_ERROR", "validation_error", message, field="body", errors=[error]
    )


def _malformed_json(error: Any, body: Any) -> JSONResponse:
    """Name where the JSON broke, as line and column (FastAPI's error gives a char offset)."""
    reason = str((error.get("ctx") or {}).get("error") or "invalid JSON")
    loc = tuple(error.get("loc", ()))
    offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    where: dict[str, int] = {}
    if isinstance(body, str) and offset is not None:
        # json's own numbering: lines from 1, columns from 1.
        where = {
            "line": body.count("\n", 0, offset) + 1,
            "column": offset - body.rfind("\n", 0, offset),
        }
    message = f"Malformed JSON body: {reason}"
    if where:
        message += f" at line {where['line']}, column {where['column']}"
    detail = {"field": "body", "message": message, "type": "json_invalid", **where}
    return error_response(
        400, "VALIDATION_ERROR", "validation_error", message, field="body", errors=[detail], **where
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        refused = await _unauthenticated(request)
        if refused is not None:
            return refused
    code, type_ = _HTTP_CODES.get(exc.status_code, ("HTTP_ERROR", "invalid_request_error"))
    message = "No such route" if exc.status_code == 404 else str(exc.detail)
    details = {"field": "body"} if exc.status_code == 400 else {}
    response = error_response(exc.status_code, code, type_, message, **details)
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        # A 405 names every method the path takes; Starlette's header names only those of
        # the first route object matching the path (GET and POST of /v1/prompts are two).
        response.headers["allow"] = ", ".join(_allowed_methods(request))
    return response


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _allowed_methods(request: Request) -> list[str]:
    allowed = []
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(
        500, "INTERNAL_ERROR", "api_error", "Internal error; see the collector log"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on an app."""
    app.add_exception_handler(ContractError, _contract_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClickHouseError, _store_error)
    app.add_exception_handler(Exception, _unexpected)
