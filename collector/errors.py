"""The errors the API answers with: one class per case of the contract's error codes.

The handler in ``api/errors.py`` turns each into the error body ``{"error": {...}}``. A code can
have several cases (``STORE_UNAVAILABLE``: the store cannot be reached, or did not take a
write). Errors the framework finds before any service runs (a malformed JSON body, a field
FastAPI refuses, an unknown route, a method the route does not take) are answered by that
handler directly, with no class here.

The names say what happened (``ValidationFailed``, ``UpstreamProviderFailed``) and, but for the
base ``ContractError``, do not end in ``Error``: the SDK's exceptions
(``promptrail.PromptrailError``, ``promptrail.ProviderError``) are the client's public API, raised
in the caller's process with other meanings, and a reader of a traceback or a grep must never
mistake one side for the other. ``UpstreamProviderFailed`` is the API's 502 for a provider's
failure; ``providers.ProviderFailure`` is the provider client's exception it is made from.
"""

from __future__ import annotations

from typing import Any, ClassVar


def plain_message(message: str) -> str:
    """Return a validation message without pydantic's ``Value error, `` prefix.

    A validator's ``ValueError`` reaches the client as its own text: the prefix names a
    Python exception, which tells an API user nothing.
    """
    return message.removeprefix("Value error, ")


class ContractError(Exception):
    """Base of every error the API answers with ``{"error": {...}}``.

    A case names its status, code and type in its class line, as the contract's table does:
    ``class RequestNotFound(NotFound, code="REQUEST_NOT_FOUND")``; what it leaves out it
    inherits.
    """

    status: ClassVar[int] = 400
    code: ClassVar[str] = "VALIDATION_ERROR"
    type: ClassVar[str] = "validation_error"

    def __init_subclass__(
        cls, *, status: int | None = None, code: str | None = None, type: str | None = None
    ) -> None:
        super().__init_subclass__()
        if status is not None:
            cls.status = status
        if code is not None:
            cls.code = code
        if type is not None:
            cls.type = type

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}
        # Headers the answer carries besides the body (``Retry-After``).
        self.headers: dict[str, str] = {}

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


class ValidationFailed(ContractError):
    """Malformed input: 400 VALIDATION_ERROR, ``details.field`` names the culprit."""

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(message, {"field": field, **details})


class InvalidTemplate(ContractError, code="INVALID_TEMPLATE"):
    """A template that cannot be parsed or rendered."""


class InvalidApiKey(ContractError, status=401, code="INVALID_API_KEY", type="authentication_error"):
    """Missing or unknown API key."""


class NotFound(ContractError, status=404, code="NOT_FOUND", type="not_found_error"):
    """Base of the 404s."""


class PromptNotFound(NotFound, code="PROMPT_NOT_FOUND"):
    """No live prompt with that name or id in the caller's project."""

    def __init__(self, prompt_name: str) -> None:
        super().__init__(f"Prompt '{prompt_name}' not found", {"prompt_name": prompt_name})


class VersionNotFound(NotFound, code="VERSION_NOT_FOUND"):
    """The prompt exists but not that version."""

    def __init__(self, prompt_name: str, version: int) -> None:
        super().__init__(
            f"Prompt '{prompt_name}' has no version {version}",
            {"prompt_name": prompt_name, "version": version},
        )


class LabelNotFound(NotFound, code="LABEL_NOT_FOUND"):
    """No version of the prompt carries that label."""

    def __init__(self, prompt_name: str, label: str) -> None:
        super().__init__(
            f"Prompt '{prompt_name}' has no label '{label}'",
            {"prompt_name": prompt_name, "label": label},
        )


class RequestNotFound(NotFound, code="REQUEST_NOT_FOUND"):
    """No request record with that id in the caller's project."""


class ExportNotFound(NotFound, code="EXPORT_NOT_FOUND"):
    """No export job with that id in the caller's project."""


class ScoreNotFound(NotFound, code="SCORE_NOT_FOUND"):
    """No score with that id in the caller's project."""

    def __init__(self, score_id: str) -> None:
        super().__init__(f"Score '{score_id}' not found", {"score_id": score_id})


class TraceNotFound(NotFound, code="TRACE_NOT_FOUND"):
    """No live record of that trace in the caller's project."""

    def __init__(self, trace_id: str) -> None:
        super().__init__(f"Trace '{trace_id}' not found", {"trace_id": trace_id})


class SessionNotFound(NotFound, code="SESSION_NOT_FOUND"):
    """No live record of that session in the caller's project."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session '{session_id}' not found", {"session_id": session_id})


class DatasetNotFound(NotFound, code="DATASET_NOT_FOUND"):
    """No dataset with that name or id in the caller's project."""

    def __init__(self, dataset: str) -> None:
        super().__init__(f"Dataset '{dataset}' not found", {"dataset": dataset})


class ExperimentNotFound(NotFound, code="EXPERIMENT_NOT_FOUND"):
    """No experiment with that id in the caller's project."""

    def __init__(self, experiment_id: str) -> None:
        super().__init__(
            f"Experiment '{experiment_id}' not found", {"experiment_id": experiment_id}
        )


class EvaluatorNotFound(NotFound, code="EVALUATOR_NOT_FOUND"):
    """No named evaluator (or no such version of it) in the caller's project."""

    def __init__(self, name: str, version: int | None = None) -> None:
        if version is None:
            super().__init__(f"Evaluator '{name}' not found", {"evaluator": name})
        else:
            super().__init__(
                f"Evaluator '{name}' has no version {version}",
                {"evaluator": name, "version": version},
            )


class RuleNotFound(NotFound, code="RULE_NOT_FOUND"):
    """No evaluation rule with that id in the caller's project."""

    def __init__(self, rule_id: str) -> None:
        super().__init__(f"Evaluation rule '{rule_id}' not found", {"rule_id": rule_id})


class InvalidFeedbackToken(
    ContractError, status=401, code="INVALID_FEEDBACK_TOKEN", type="authentication_error"
):
    """A feedback token that is malformed, altered, expired, or from a revoked key."""


class KeyNotFound(NotFound, code="KEY_NOT_FOUND"):
    """No API key with that id or value (admin routes and the CLI only)."""


class PromptAlreadyExists(
    ContractError, status=409, code="PROMPT_ALREADY_EXISTS", type="conflict_error"
):
    """A live prompt already has that name."""

    def __init__(self, prompt_name: str) -> None:
        super().__init__(f"Prompt '{prompt_name}' already exists", {"prompt_name": prompt_name})


class DatasetAlreadyExists(
    ContractError, status=409, code="DATASET_ALREADY_EXISTS", type="conflict_error"
):
    """A live dataset already has that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Dataset '{name}' already exists", {"name": name})


class PayloadTooLarge(ContractError, status=413, code="PAYLOAD_TOO_LARGE"):
    """Request body over the configured limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body exceeds {limit} bytes", {"max_bytes": limit})


class RateLimited(ContractError, status=429, code="RATE_LIMITED", type="rate_limit_error"):
    """The project is over one of its limits (docs/security.md): 429 with ``Retry-After``."""

    def __init__(self, project: str, limit: str, rate: str, retry_after: int) -> None:
        super().__init__(
            f"Project '{project}' is over its {limit} limit ({rate}); retry after {retry_after} s",
            {"project": project, "limit": limit, "rate": rate, "retry_after": retry_after},
        )
        self.headers = {"Retry-After": str(retry_after)}


class UnsupportedMediaType(
    ContractError, status=415, code="UNSUPPORTED_MEDIA_TYPE", type="validation_error"
):
    """A body in none of the media types the route reads (OTLP: protobuf or JSON)."""


class UpstreamProviderFailed(
    ContractError, status=502, code="PROVIDER_ERROR", type="provider_error"
):
    """The model provider failed a run: 502 PROVIDER_ERROR."""


class StoreUnavailable(ContractError, status=503, code="STORE_UNAVAILABLE", type="api_error"):
    """The store cannot be reached, is held by another process, or refuses writes."""

    def __init__(
        self, message: str, details: dict[str, Any] | None = None, retry_after: int = 2
    ) -> None:
        super().__init__(message, details)
        self.headers = {"Retry-After": str(retry_after)}


class StoreWriteFailed(StoreUnavailable):
    """The store did not take the records; the client should retry (nothing half-written)."""


class StoreBusy(StoreUnavailable, code="STORE_BUSY"):
    """The ingest buffer is full: the store takes records slower than they arrive."""


class VersionContention(ContractError, status=503, code="VERSION_CONFLICT", type="conflict_error"):
    """Too many concurrent writers kept taking the next version number."""


class InsufficientScope(
    ContractError, status=403, code="INSUFFICIENT_SCOPE", type="permission_error"
):
    """A key without the scope a route needs (docs/security.md, "Roles and scopes")."""

    def __init__(self, required: str) -> None:
        super().__init__(
            f"This API key lacks the '{required}' scope this request needs", {"required": required}
        )


class Forbidden(ContractError, status=403, code="FORBIDDEN", type="permission_error"):
    """A signed-in user whose role does not allow the request, or a cookie write without its
    CSRF token (``details.reason = "csrf"``); details say which."""


class InvalidCredentials(
    ContractError, status=401, code="INVALID_CREDENTIALS", type="authentication_error"
):
    """A sign-in with a wrong e-mail or password (one answer for both), or no live session."""


class SignInLimited(ContractError, status=429, code="RATE_LIMITED", type="rate_limit_error"):
    """Too many failed sign-ins for one e-mail address within a minute: 429 with
    ``Retry-After`` (docs/security.md, "Accounts")."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"Too many failed sign-ins for this e-mail address; retry after {retry_after} s",
            {"retry_after": retry_after},
        )
        self.headers = {"Retry-After": str(retry_after)}


class UserNotFound(NotFound, code="USER_NOT_FOUND"):
    """No user account with that e-mail address."""

    def __init__(self, email: str, message: str | None = None) -> None:
        super().__init__(message or f"No user with e-mail '{email}'", {"email": email})


class ProjectNotFound(NotFound, code="PROJECT_NOT_FOUND"):
    """No project of that name."""

    def __init__(self, project: str) -> None:
        super().__init__(f"Project '{project}' not found", {"project": project})


class UserAlreadyExists(
    ContractError, status=409, code="USER_ALREADY_EXISTS", type="conflict_error"
):
    """A user already has that e-mail address (in any case)."""

    def __init__(self, email: str) -> None:
        super().__init__(f"A user with e-mail '{email}' already exists", {"email": email})


class ProjectAlreadyExists(
    ContractError, status=409, code="PROJECT_ALREADY_EXISTS", type="conflict_error"
):
    """A project of that name already exists."""

    def __init__(self, project: str) -> None:
        super().__init__(f"Project '{project}' already exists", {"project": project})


class ConnectionNotFound(NotFound, code="CONNECTION_NOT_FOUND"):
    """No provider connection of that name in the caller's project."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Connection '{name}' not found", {"connection": name})


class ConnectionAlreadyExists(
    ContractError, status=409, code="CONNECTION_ALREADY_EXISTS", type="conflict_error"
):
    """A live connection of the project already has that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Connection '{name}' already exists", {"connection": name})


class BudgetExceeded(ContractError, status=402, code="BUDGET_EXCEEDED", type="budget_error"):
    """A connection's spend this month has reached its monthly budget: nothing is sent."""
