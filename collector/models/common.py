"""Envelopes shared by every route: ``data``, pagination, the error body."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Pagination(BaseModel):
    """Spec 2.9."""

    has_more: bool
    next_cursor: str | None = None
    total: int | None = Field(default=None, description="Prompt list only.")


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
    }.items()
}
