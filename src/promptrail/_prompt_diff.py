"""What ``client.prompts.diff`` returns: the changes between two versions of a prompt.

A module of its own beside :mod:`._types` (which holds the other answers' models), read as
leniently: extra fields are kept, so a collector that adds one never breaks an older client.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PromptChange", "PromptDiff"]


class PromptChange(BaseModel):
    """Hold one change of a diff: ``path`` names what changed (``messages[2].content``,
    ``tools.get_weather.parameters.properties.unit``, ``parameters.temperature``); ``kind``
    is ``added`` (``before`` None), ``removed`` (``after`` None) or ``changed``."""

    model_config = ConfigDict(extra="allow")

    path: str
    kind: str
    before: Any = None
    after: Any = None


class PromptDiff(BaseModel):
    """Hold what changed from version ``from_`` to version ``to`` (``from`` on the wire)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: int = Field(alias="from")
    to: int
    changes: list[PromptChange]
