"""Labels (CONTRACT 4): list, attach or move, remove."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from ...models.prompts import LabelMove, LabelOut, LabelRemoved
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts/{name}/labels", tags=["labels"])


class LabelListData(BaseModel):
    """``data`` = the prompt's labels."""

    data: list[LabelOut]


class LabelData(BaseModel):
    """``data`` = one label."""

    data: LabelOut


class LabelRemovedData(BaseModel):
    """``data`` = removal result."""

    data: LabelRemoved


@router.get("", response_model=LabelListData)
def list_labels(name: str, project: Project, services: ServicesDep) -> LabelListData:
    """List the prompt's labels and the versions they point at."""
    return LabelListData(
        data=[
            LabelOut(label=label, version=version, updated_at=at)
            for label, version, at in services.prompts.labels(project, name)
        ]
    )


@router.put("/{label}", response_model=LabelData)
def move_label(
    name: str, label: str, body: LabelMove, project: Project, services: ServicesDep
) -> LabelData:
    """Attach a label to a version, moving it off any other."""
    _, version, at = services.prompts.move_label(project, name, label, body.version)
    return LabelData(data=LabelOut(label=label, version=version, updated_at=at))


@router.delete("/{label}", response_model=LabelRemovedData)
def remove_label(
    name: str, label: str, project: Project, services: ServicesDep
) -> LabelRemovedData:
    """Detach a label."""
    services.prompts.remove_label(project, name, label)
    return LabelRemovedData(data=LabelRemoved(deleted=True, label=label))
