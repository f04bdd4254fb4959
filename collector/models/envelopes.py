"""Envelopes shared by every route: ``data``, pagination, the error body."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

T = TypeVar("T")


class Data(BaseModel, Generic[T]):
    """``{"data": ...}``: the answer of every route but lists (OpenAPI names it ``Data_X_``)."""

    data: T


class Pagination(BaseModel):
    """Spec 2.9."""

    has_more: bool
    next_cursor: str | None = None
    total: int | None = Field(default=None, description="Prompt list only.")

    @classmethod
    def of(cls, next_cursor: str | None, total: int | None = None) -> Pagination:
        """A page's pagination: more pages exactly when there is a next cursor."""
        return cls(has_more=next_cursor is not None, next_cursor=next_cursor, total=total)

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # next_cursor is present only when there is a next page; total on prompt lists only.
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}


class Page(BaseModel, Generic[T]):
    """``{"data": [...], "pagination": {...}}``: a page of a list."""

    data: list[T]
    pagination: Pagination


class ErrorInfo(BaseModel):
    """The inside of the error body."""

    type: str
    message: str
    code: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    """Every failure: ``{"error": {"type", "message", "code", "details"}}``."""

    error: ErrorInfo


class Health(BaseModel):
    """``GET /health``."""

    status: str


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        400: "VALIDATION_ERROR or INVALID_TEMPLATE",
        401: "INVALID_API_KEY",
        404: "Not found",
        413: "PAYLOAD_TOO_LARGE",
        429: "RATE_LIMITED: the project is over a limit; wait the `Retry-After` seconds",
        503: "STORE_UNAVAILABLE or STORE_BUSY: the store is out of reach or behind; "
        "wait the `Retry-After` seconds",
    }.items()
}
