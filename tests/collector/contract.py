"""The contract's error body, checked as a client relies on it (docs/api-notes.md, "Errors beyond
the contract's table")."""

from __future__ import annotations

from typing import Any


def assert_error(
    response: Any,
    status: int,
    code: str | None = None,
    field: str | None = None,
    *,
    type_: str | None = None,
) -> dict[str, Any]:
    """Check an error answer; return its ``details``.

    Always: the status, a JSON body that is ``{"error": {...}}`` with the four fields, a code
    and a message. Then what is given: the ``code``, the ``type_``, and (for validation) the
    ``field`` the details name (or a field inside it).
    """
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"type", "message", "code", "details"}, error
    assert isinstance(error["code"], str)
    assert error["code"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["details"], dict)
    if code is not None:
        assert error["code"] == code, error
    if type_ is not None:
        assert error["type"] == type_, error
    if field is not None:
        named = error["details"].get("field", "")
        assert named == field or named.startswith(field + "."), error
    details: dict[str, Any] = error["details"]
    return details
