"""The registry's rows: their types, and how a version is encoded for the store and read back.

Apart from the tables and the queries so that a version's fields are written down in one
place. A new field of a prompt version (chat prompts add some) goes, in this order, into:

1. the ``PROMPT_VERSIONS`` columns in :mod:`.tables`, and the tuple of its ``version_json``
   column (a migration adds it to stored databases, see ``store/migrations.py``);
2. :class:`PromptVersionRow` below;
3. :func:`_version_values`, the inserted columns in table order;
4. :func:`_packed_version`, the ``version_json`` array in its tuple's order.

The chat-prompt fields are the exception: one ``chat`` column holds them all as a JSON object
(:data:`CHAT_FIELDS`, those a version has), read beside ``version_json`` (:data:`VERSION_COLUMNS`)
because a stored ``version_json`` keeps the expression it was created with. A new chat field
is a key of that object: :data:`CHAT_FIELDS` and :class:`PromptVersionRow` only.

:func:`_literal` is here too, as the embedded store's encoding of the same values for inline
``VALUES`` rows. It is the one place the registry's SQL is not parameterised: hand-escaped
literals, because chDB parses them at a fraction of the cost of query parameters (see
docs/architecture.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any


def _literal(value: Any) -> str:
    """A value as a ClickHouse literal of a ``VALUES`` row (strings, ints, string arrays, UTC
    datetimes). Inline rows parse at a fraction of the cost of query parameters in chDB (a
    one-row insert 4.8 ms against 8.5, docs/architecture.md)."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0") + "'"
    if isinstance(value, bool | int):
        return str(int(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join(_literal(item) for item in value) + "]"
    if isinstance(value, datetime):
        return "'" + value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "'"
    raise TypeError(f"no literal for {type(value).__name__}")


@dataclass(frozen=True)
class PromptVersionRow:
    """One stored version of a prompt, with the fields its prompt had at that version."""

    prompt_id: str
    version: int
    version_id: str
    name: str
    description: str
    template: str
    model: str
    parameters: dict[str, Any]
    tags: list[str]
    folder: str
    note: str
    prompt_created_at: datetime
    created_at: datetime
    # Chat prompts (docs/api-notes.md): ``type`` is fixed at create; a chat prompt's content
    # is ``messages`` (its ``template`` is ""). None: the version does not have the field.
    type: str = "text"
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    variables_schema: dict[str, Any] | None = None
    config: Any = None
    # The playground run (``pg_…``) the version was saved from, if any; kept in ``chat``.
    source_run_id: str | None = None


# The version fields the ``chat`` column holds, beside ``type``.
CHAT_FIELDS = (
    "messages",
    "tools",
    "tool_choice",
    "response_format",
    "variables_schema",
    "config",
    "source_run_id",
)
# What a read of whole versions selects; :func:`_packed_version` takes them in this order.
VERSION_COLUMNS = "version_json, chat"


@dataclass(frozen=True)
class PromptHeadRow:
    """A list item: the prompt's newest version's list fields."""

    prompt_id: str
    name: str
    description: str
    version: int
    prompt_created_at: datetime
    tags: list[str]
    folder: str


@dataclass(frozen=True)
class PromptRef:
    """How a path addresses a prompt: by id (``prompt_<hex>``) or by name."""

    value: str
    by_id: bool


@dataclass(frozen=True)
class LivePrompt:
    """A live prompt as the embedded store's index keeps it: newest version and labels.

    ``rows`` are the stored versions a read can ask for by default (the newest and each
    labeled one), so the index answers those reads from memory.
    """

    name: str
    prompt_id: str
    newest: int
    labels: tuple[tuple[str, int], ...]
    rows: tuple[PromptVersionRow, ...] = ()


@dataclass(frozen=True)
class LiveState:
    """Every live prompt of a project, and the newest label move ever stored in it.

    ``generations`` is the highest generation each name ever claimed (deleted ones too): the
    generation a create of that name claims next is one more.
    """

    prompts: list[LivePrompt]
    label_stamp: datetime | None
    generations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RegistryChanges:
    """What other writers may have stored in some projects since a time (a poll's answer).

    ``claims`` are (project, name, generation, prompt_id, is_deleted) rows, claims and delete
    rows alike, in (project, name, generation, claim before delete) order; ``versions`` the
    versions stored since, per project; ``labels`` the store's current pointer of every
    (project, prompt_id, label) moved since, as (project, prompt_id, label, version, last
    move's updated_at), version 0 when removed.
    """

    claims: list[tuple[str, str, int, str, bool]]
    versions: list[tuple[str, PromptVersionRow]]
    labels: list[tuple[str, str, str, int, datetime]]


@dataclass(frozen=True)
class ListFilter:
    """Filters of the prompt list."""

    tags: list[str]
    folder: str | None
    search: str | None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _packed_version(text: str, chat: str = "") -> PromptVersionRow:
    """Build a version from its ``version_json`` and ``chat`` columns."""
    row = json.loads(text)
    extras: dict[str, Any] = json.loads(chat) if chat else {}
    return PromptVersionRow(
        prompt_id=row[0],
        version=int(row[1]),
        version_id=row[2],
        name=row[3],
        description=row[4],
        template=row[5],
        model=row[6],
        parameters=json.loads(row[7]) if row[7] else {},
        tags=list(row[8]),
        folder=row[9],
        note=row[10],
        prompt_created_at=_EPOCH + timedelta(milliseconds=int(row[11])),
        created_at=_EPOCH + timedelta(milliseconds=int(row[12])),
        type=extras.get("type", "text"),
        **{key: extras[key] for key in CHAT_FIELDS if key in extras},
    )


def _chat_value(row: PromptVersionRow) -> str:
    """The ``chat`` column of a version: "" for a text prompt without chat fields."""
    fields = {key: getattr(row, key) for key in CHAT_FIELDS if getattr(row, key) is not None}
    if row.type == "text" and not fields:
        return ""
    return json.dumps({"type": row.type, **fields}, ensure_ascii=False, sort_keys=True)


def _version_values(project: str, row: PromptVersionRow) -> list[Any]:
    """The inserted columns of ``prompt_versions`` for a version, in table order."""
    return [
        project,
        row.prompt_id,
        row.version,
        row.version_id,
        row.name,
        row.description,
        row.template,
        row.model,
        json.dumps(row.parameters, ensure_ascii=False, sort_keys=True),
        row.tags,
        row.folder,
        row.note,
        row.prompt_created_at,
        row.created_at,
        _chat_value(row),
    ]
