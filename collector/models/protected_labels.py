"""Wire shapes of a project's protected labels (docs/api-notes.md, "Protected labels")."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from .prompts import LabelName


class ProtectedLabelsIn(BaseModel):
    """``PUT /v1/projects/{project}/protected-labels``: the whole new list."""

    model_config = ConfigDict(extra="forbid")

    labels: list[LabelName] = Field(max_length=50)


class ProtectedLabelsOut(BaseModel):
    """A project's protected labels, sorted, and who last set them when (null: never set)."""

    project: str
    labels: list[str]
    updated_at: datetime | None
    updated_by: str | None
