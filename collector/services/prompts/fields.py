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
from ...models.chat_prompts import stored
from ...models.prompts import PromptCreate, PromptUpdate
from ...store.prompts import PromptVersionRow
from ..dates import utc_now_ms
from ..templates import check_messages, parse_template

# A version's chat-prompt fields either type of prompt may carry (docs/api-notes.md, Chat
# prompts); a PATCH sets one to null to leave it out of the new version.
EXTRAS = ("tools", "tool_choice", "response_format", "variables_schema", "config")
# The fields a PATCH copies onto the new version when it sets them (``labels`` are moved,
# not stored on the version; ``name`` and ``type`` cannot change).
PATCHABLE = ("template", "messages", "model", "description", "parameters", "tags", "folder")
# The fields a rollback copies from the version it restores; the rest stay the newest's.
RESTORED = ("template", "messages", "model", "parameters", *EXTRAS, "source_run_id")

# Builds version N+1's fields from version N (the writer numbers and stamps it).
Build = Callable[[PromptVersionRow], PromptVersionRow]


def first_version(body: PromptCreate) -> PromptVersionRow:
    """Validate a create's body and build its version 1, with a new prompt id."""
    if body.template is not None:
        parse_template(body.template)
    messages = stored(body.messages)
    if messages is not None:
        check_messages(messages)
    now = utc_now_ms()
    return PromptVersionRow(
        prompt_id=uuid.uuid4().hex,
        version=1,
        version_id=str(uuid.uuid4()),
        name=body.name,
        description=body.description,
        template=body.template or "",
        model=body.model,
        parameters=body.parameters,
        tags=body.tags,
        folder=body.folder or "",
        note="",
        prompt_created_at=now,
        created_at=now,
        type=body.type,
        messages=messages,
        source_run_id=body.source_run_id,
        **{key: stored(getattr(body, key)) for key in EXTRAS},
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
    if body.messages is not None:
        check_messages(stored(body.messages))
    if "folder" in fields and body.folder is None:
        body = body.model_copy(update={"folder": ""})
    changes: dict[str, Any] = {
        key: stored(getattr(body, key))
        for key in PATCHABLE
        if key in fields and getattr(body, key) is not None
    }
    changes.update({key: stored(getattr(body, key)) for key in EXTRAS if key in fields})
    # The run a version was saved from is the new version's alone: never inherited.
    changes["source_run_id"] = body.source_run_id
    name = body.name
    kind = body.type

    def build(head: PromptVersionRow) -> PromptVersionRow:
        if name is not None and name != head.name:
            raise ValidationFailed("name", "Renaming a prompt is not supported")
        if kind is not None and kind != head.type:
            raise ValidationFailed(
                "type", f"A prompt's type is fixed at create: this is a {head.type} prompt"
            )
        # A chat prompt's content is its messages, a text prompt's its template.
        other = "template" if head.type == "chat" else "messages"
        if other in changes:
            raise ValidationFailed(
                other,
                f"{other} belongs to {'text' if other == 'template' else 'chat'} prompts; "
                f"this is a {head.type} prompt",
            )
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
