"""A version's fields: where each write's body is validated and its version built.

Every way a version comes to be passes through here: a create builds version 1
(:func:`first_version`), a PATCH the next version from the newest and the fields it sets
(:func:`patched_version`), a rollback the next version from the newest with an older
version's content (:func:`restored_version`). A field a version gains is validated and copied
here, and nowhere else: :data:`PATCHABLE` names what a PATCH may set, :data:`RESTORED` what a
rollback brings back. The numbering, ids and times of versions N+1 are the writer's
(:mod:`.writes`), as is the order in which a write's errors are raised.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...errors import ValidationFailed
from ...models.prompts import PromptCreate, PromptUpdate
from ...store.prompts import PromptVersionRow
from ..dates import utc_now_ms
from ..templates import parse_template

# The fields a PATCH copies onto the new version when it sets them (``labels`` are moved,
# not stored on the version; ``name`` cannot change).
PATCHABLE = ("template", "model", "description", "parameters", "tags", "folder")
# The fields a rollback copies from the version it restores; the rest stay the newest's.
RESTORED = ("template", "model", "parameters")

# Builds version N+1's fields from version N (the writer numbers and stamps it).
Build = Callable[[PromptVersionRow], PromptVersionRow]


def first_version(body: PromptCreate) -> PromptVersionRow:
    """Validate a create's body and build its version 1, with a new prompt id."""
    parse_template(body.template)
    now = utc_now_ms()
    return PromptVersionRow(
        prompt_id=uuid.uuid4().hex,
        version=1,
        version_id=str(uuid.uuid4()),
        name=body.name,
        description=body.description,
        template=body.template,
        model=body.model,
        parameters=body.parameters,
        tags=body.tags,
        folder=body.folder or "",
        note="",
        prompt_created_at=now,
        created_at=now,
    )


def patched_version(body: PromptUpdate) -> Build:
    """Validate a PATCH's body; return how its version is built from the newest.

    A body that sets no prompt field, or a template that does not parse, is refused here,
    before the prompt is looked up; a rename only once the newest version is read (so a
    missing prompt answers 404 first).
    """
    fields = body.model_fields_set - {"labels"}
    if not fields:
        raise ValidationFailed("body", "PATCH needs at least one prompt field to change")
    if body.template is not None:
        parse_template(body.template)
    if "folder" in fields and body.folder is None:
        body = body.model_copy(update={"folder": ""})
    changes: dict[str, Any] = {
        key: getattr(body, key)
        for key in PATCHABLE
        if key in fields and getattr(body, key) is not None
    }
    name = body.name

    def build(head: PromptVersionRow) -> PromptVersionRow:
        if name is not None and name != head.name:
            raise ValidationFailed("name", "Renaming a prompt is not supported")
        return replace(head, **changes, note="")

    return build


def restored_version(source: PromptVersionRow, target: int) -> Build:
    """Return how a rollback to ``source`` (version ``target``) builds its version from the
    newest: the restored fields of ``source``, and a note saying what it restores."""
    restored: dict[str, Any] = {key: getattr(source, key) for key in RESTORED}

    def build(head: PromptVersionRow) -> PromptVersionRow:
        note = (
            f"Rollback to version {target}: version {head.version + 1} restores "
            f"version {target} (was version {head.version})"
        )
        return replace(head, **restored, note=note)

    return build
