"""Labels (docs/api-notes.md, "Prompts"): list, attach or move, remove."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.envelopes import Data
from ...models.prompts import LabelMove, LabelOut, LabelRemoved
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts/{name}/labels", tags=["labels"])


@router.get("", response_model=Data[list[LabelOut]])
def list_labels(name: str, project: Project, services: ServicesDep) -> Data[list[LabelOut]]:
    """List the prompt's labels and the versions they point at."""
    return Data(
        data=[
            LabelOut(label=label, version=version, updated_at=at)
            for label, version, at in services.prompts.labels(project, name)
        ]
    )


@router.put("/{label}", response_model=Data[LabelOut])
def move_label(
    name: str, label: str, body: LabelMove, project: Project, services: ServicesDep
) -> Data[LabelOut]:
    """Attach a label to a version, moving it off any other."""
    _, version, at = services.prompts.move_label(project, name, label, body.version)
    return Data(data=LabelOut(label=label, version=version, updated_at=at))


@router.delete("/{label}", response_model=Data[LabelRemoved])
def remove_label(
    name: str, label: str, project: Project, services: ServicesDep
) -> Data[LabelRemoved]:
    """Detach a label."""
    services.prompts.remove_label(project, name, label)
    return Data(data=LabelRemoved(deleted=True, label=label))
