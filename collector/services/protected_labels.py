"""Protected labels (docs/api-notes.md, "Protected labels"): the labels of a project only an
admin may attach, move or remove, and the check every label change passes.

The check reads who is calling from :mod:`..access.caller` (set by the request's access check),
so the prompt service's label moves need no caller of their own: a change made outside a
request (the CLI, a restore) is no one's to refuse. A key with the ``admin`` scope and a user
whose role is admin or owner pass; anyone else is refused naming the label. A check that can
refuse reads the project's row (one point read): only label changes by non-admins pay it, and
every collector of a store sees a new list at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ..access.caller import current_caller
from ..access.principal import Principal
from ..errors import Forbidden, InsufficientScope, ValidationFailed
from ..models.prompts import check_label
from ..store.protected_labels import ProtectedLabelsRow, ProtectedLabelStore
from .refused_writes import raise_if_refused

MAX_PROTECTED = 50
_LATEST = "latest"


def may_change_protected(caller: Principal) -> bool:
    """Whether a caller may attach, move or remove a protected label."""
    if caller.scopes is not None:
        return "admin" in caller.scopes
    return caller.role in ("owner", "admin")


class ProtectedLabels:
    """Set, read and enforce each project's protected labels."""

    def __init__(self, store: ProtectedLabelStore, retry_after_seconds: int = 2) -> None:
        self._store = store
        self._retry_after = retry_after_seconds

    def get(self, project: str) -> ProtectedLabelsRow:
        """The project's protected labels, sorted (an empty list if never set)."""
        row = self._store.get(project)
        if row.updated_at is not None and row.updated_at.tzinfo is None:
            row = ProtectedLabelsRow(
                row.project, row.labels, row.updated_at.replace(tzinfo=UTC), row.updated_by
            )
        return row

    def put(self, project: str, labels: Iterable[str], updated_by: str) -> ProtectedLabelsRow:
        """Make ``labels`` the project's protected labels (replacing the list)."""
        wanted = sorted(set(labels))
        if len(wanted) > MAX_PROTECTED:
            raise ValidationFailed("labels", f"at most {MAX_PROTECTED} protected labels")
        for label in wanted:
            if label == _LATEST:
                raise ValidationFailed(
                    "labels", "'latest' is not a stored label: it cannot be protected"
                )
            try:
                check_label(label)
            except ValueError as exc:
                raise ValidationFailed("labels", str(exc)) from None
        row = ProtectedLabelsRow(project, tuple(wanted), datetime.now(UTC), updated_by)
        raise_if_refused(self._store.put(row), self._retry_after, "protected labels")
        return row

    def restricted(self, project: str) -> bool:
        """Whether the request's caller would be refused some label change in ``project``."""
        caller = current_caller()
        return (
            caller is not None
            and not may_change_protected(caller)
            and bool(self.get(project).labels)
        )

    def check(self, project: str, labels: Iterable[str]) -> None:
        """Refuse the request's caller a change of any protected label among ``labels``.

        A key without ``admin``: 403 INSUFFICIENT_SCOPE (``details.required = "admin"``); a user
        below admin: 403 FORBIDDEN (``details.required_role = "admin"``); both name the label.
        """
        names = list(labels)
        caller = current_caller()
        if not names or caller is None or may_change_protected(caller):
            return
        protected = set(self.get(project).labels)
        for label in names:
            if label in protected:
                raise _refusal(caller, label)


def _refusal(caller: Principal, label: str) -> InsufficientScope | Forbidden:
    if caller.scopes is not None:
        refused = InsufficientScope("admin")
        refused.details["label"] = label
        return refused
    return Forbidden(
        f"'{label}' is a protected label: only an admin attaches, moves or removes it",
        {"required_role": "admin", "label": label, "reason": "protected_label"},
    )
