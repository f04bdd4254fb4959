"""A project's protected labels (docs/api-notes.md, "Protected labels"): read by any reader of
the project, set by its admins. Which labels they protect is enforced on every label change
(services/protected_labels.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ...models.envelopes import Data
from ...models.protected_labels import ProtectedLabelsIn, ProtectedLabelsOut
from ...store.protected_labels import ProtectedLabelsRow
from ..access import signed_in_user
from ..deps import CurrentPrincipal, ServicesDep

router = APIRouter(prefix="/projects/{project}/protected-labels", tags=["projects"])


@router.get("", response_model=Data[ProtectedLabelsOut])
def get_protected_labels(
    principal: CurrentPrincipal, services: ServicesDep
) -> Data[ProtectedLabelsOut]:
    """The project's protected labels (the path names the caller's project, else 404)."""
    return Data(data=_out(services.protected_labels.get(principal.project)))


@router.put("", response_model=Data[ProtectedLabelsOut])
def put_protected_labels(
    body: ProtectedLabelsIn, request: Request, principal: CurrentPrincipal, services: ServicesDep
) -> Data[ProtectedLabelsOut]:
    """Replace the project's protected labels (admin)."""
    user = signed_in_user(request)
    by = user.email if user is not None else principal.key_id or ""
    return Data(data=_out(services.protected_labels.put(principal.project, body.labels, by)))


def _out(row: ProtectedLabelsRow) -> ProtectedLabelsOut:
    return ProtectedLabelsOut(
        project=row.project,
        labels=list(row.labels),
        updated_at=row.updated_at,
        updated_by=row.updated_by or None,
    )
