"""The exceptions the REST client raises: one class per family of the contract's error codes.

Every error the collector answers with ``{"error": {type, message, code, details}}`` becomes a
:class:`PromptrailError` subclass chosen by HTTP status; ``.code`` tells the exact case apart
(``PROMPT_NOT_FOUND`` and ``LABEL_NOT_FOUND`` are both a :class:`NotFoundError`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "ConflictError",
    "MissingVariablesError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PromptrailError",
    "ProviderError",
    "TemplateError",
    "ValidationError",
    "error_class_for",
]


class PromptrailError(Exception):
    """Signal a failure of a collector call; the base of every error the client raises.

    ``status`` is the HTTP status (``None`` when no answer came back), ``code`` the contract's
    machine code (``PROMPT_NOT_FOUND``), ``type`` its category (``not_found_error``),
    ``message`` the human text and ``details`` the code's context (``{"prompt_name": ...}``).
    ``retry_after`` is the seconds the collector asked to wait before trying again (its
    ``Retry-After`` on a 503 or 429), or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        type: str = "",
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.type = type
        self.details: dict[str, Any] = details or {}
        self.retry_after = retry_after

    def __str__(self) -> str:
        prefix = " ".join(str(part) for part in (self.status, self.code) if part)
        return f"{prefix}: {self.message}" if prefix else self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r})"
        )


class ValidationError(PromptrailError):
    """Signal a refused input (400): ``VALIDATION_ERROR`` (``details.field``) or
    ``INVALID_TEMPLATE`` (``details.missing_variables``)."""


class AuthenticationError(PromptrailError):
    """Signal a missing or unknown API key (401 ``INVALID_API_KEY``)."""


class NotFoundError(PromptrailError):
    """Signal that the prompt, version, label, request or export does not exist (404)."""


class ConflictError(PromptrailError):
    """Signal a conflict (409), such as ``PROMPT_ALREADY_EXISTS``."""


class PayloadTooLargeError(PromptrailError):
    """Signal a request body over the collector's limit (413 ``PAYLOAD_TOO_LARGE``)."""


class ProviderError(PromptrailError):
    """Signal that the model provider failed a run (502 ``PROVIDER_ERROR``).

    ``details["request_id"]`` names the request record the collector kept of the failure.
    """


class APIConnectionError(PromptrailError):
    """Signal that the collector could not be reached or the connection broke."""


class APITimeoutError(APIConnectionError):
    """Signal that the collector did not answer in time."""


class TemplateError(ValidationError):
    """Signal that a template cannot be filled locally with the values given.

    Raised by a template's ``render`` and ``compile`` (and ``openai_kwargs`` /
    ``anthropic_kwargs``) before anything reaches a model, with the code the collector uses
    for the same mistake in a run: ``INVALID_TEMPLATE`` when variables or placeholders are
    missing (``missing_variables`` and ``missing_placeholders`` list them, sorted), or
    ``VALIDATION_ERROR`` when a value has the wrong type (``field`` is ``variables.<name>``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "INVALID_TEMPLATE",
        missing_variables: list[str] | None = None,
        missing_placeholders: list[str] | None = None,
        field: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.missing_variables = sorted(missing_variables or [])
        self.missing_placeholders = sorted(missing_placeholders or [])
        self.field = field
        found: dict[str, Any] = dict(details or {})
        if self.missing_variables:
            found["missing_variables"] = self.missing_variables
        if self.missing_placeholders:
            found["missing_placeholders"] = self.missing_placeholders
        if field is not None:
            found["field"] = field
        super().__init__(message, code=code, type="validation_error", details=found)


class MissingVariablesError(TemplateError):
    """Signal that a local render left template variables undefined.

    Raised by :meth:`promptrail.PromptTemplate.render` with the code the collector uses for
    the same mistake in a run, ``INVALID_TEMPLATE``; ``missing_variables`` lists the names,
    sorted.
    """

    def __init__(self, missing_variables: list[str], template: str) -> None:
        names = sorted(missing_variables)
        super().__init__(
            f"Template variables are undefined: {', '.join(names)}",
            missing_variables=names,
            details={"template": template},
        )


_BY_STATUS: dict[int, type[PromptrailError]] = {
    400: ValidationError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    502: ProviderError,
}


def error_class_for(status: int) -> type[PromptrailError]:
    """Return the exception class for an HTTP error status (the base class if none fits)."""
    return _BY_STATUS.get(status, PromptrailError)
