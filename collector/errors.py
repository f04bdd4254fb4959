"""One exception per contract error code; a single handler turns them into the error body."""

from __future__ import annotations

from typing import Any, ClassVar


class PromptrailError(Exception):
    """Base of every error the API answers with ``{"error": {...}}``."""

    status: ClassVar[int] = 400
    code: ClassVar[str] = "VALIDATION_ERROR"
    type: ClassVar[str] = "validation_error"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def body(self) -> dict[str, Any]:
        """Return the contract's error body."""
        return {
            "error": {
                "type": self.type,
                "message": self.message,
                "code": self.code,
                "details": self.details,
            }
        }


class ValidationFailed(PromptrailError):
    """Malformed input: 400 VALIDATION_ERROR, ``details.field`` names the culprit."""

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(message, {"field": field, **details})


class InvalidTemplate(PromptrailError):
    """A template that cannot be parsed or rendered."""

    code = "INVALID_TEMPLATE"


class InvalidApiKey(PromptrailError):
    """Missing or unknown API key."""

    status = 401
    code = "INVALID_API_KEY"
    type = "authentication_error"


class NotFound(PromptrailError):
    """Base of the 404s."""

    status = 404
    code = "NOT_FOUND"
    type = "not_found_error"


class PromptNotFound(NotFound):
    """No live prompt with that name or id in the caller's project."""

    code = "PROMPT_NOT_FOUND"

    def __init__(self, prompt_name: str) -> None:
        super().__init__(f"Prompt '{prompt_name}' not found", {"prompt_name": prompt_name})


class VersionNotFound(NotFound):
    """The prompt exists but not that version."""

    code = "VERSION_NOT_FOUND"

    def __init__(self, prompt_name: str, version: int) -> None:
        super().__init__(
            f"Prompt '{prompt_name}' has no version {version}",
            {"prompt_name": prompt_name, "version": version},
        )


class LabelNotFound(NotFound):
    """No version of the prompt carries that label."""

    code = "LABEL_NOT_FOUND"

    def __init__(self, prompt_name: str, label: str) -> None:
        super().__init__(
            f"Prompt '{prompt_name}' has no label '{label}'",
            {"prompt_name": prompt_name, "label": label},
        )


class RequestNotFound(NotFound):
    """No request record with that id in the caller's project."""

    code = "REQUEST_NOT_FOUND"


class ExportNotFound(NotFound):
    """No export job with that id in the caller's project."""

    code = "EXPORT_NOT_FOUND"


class PromptAlreadyExists(PromptrailError):
    """A live prompt already has that name."""

    status = 409
    code = "PROMPT_ALREADY_EXISTS"
    type = "conflict_error"

    def __init__(self, prompt_name: str) -> None:
        super().__init__(f"Prompt '{prompt_name}' already exists", {"prompt_name": prompt_name})


class PayloadTooLarge(PromptrailError):
    """Request body over the configured limit."""

    status = 413
    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body exceeds {limit} bytes", {"max_bytes": limit})


class ProviderError(PromptrailError):
    """The model provider failed."""

    status = 502
    code = "PROVIDER_ERROR"
    type = "provider_error"


class StoreUnavailable(PromptrailError):
    """The store cannot be reached or is held by another process."""

    status = 503
    code = "STORE_UNAVAILABLE"
    type = "api_error"
