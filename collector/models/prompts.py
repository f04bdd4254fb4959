"""Prompt, version, label and template shapes (spec 2.1-2.3, 4.1, 4.2, 4.4)."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    ValidationInfo,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from .chat_prompts import (
    Config,
    Messages,
    ResponseFormat,
    ToolChoice,
    Tools,
    VariablesSchema,
)
from .json_values import check_json
from .rows import NoneIfEmpty, RowModel

if TYPE_CHECKING:  # the rows these answers are read from (for the type checker only)
    from ..services.prompts.diff import VersionDiff
    from ..store.prompts import PromptHeadRow, PromptVersionRow

MAX_TEMPLATE_CHARS = 1024 * 1024

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_ID_SHAPE = re.compile(r"prompt_[0-9a-f]{32}")


def _is_name(value: str) -> bool:
    # Letters of every script, combining marks included (Devanagari, Thai, "e" + U+0301).
    if not 1 <= len(value) <= 128 or not (value[0].isalnum() or value[0] == "_"):
        return False
    return all(
        c.isalnum() or c in "_.-" or unicodedata.category(c).startswith("M") for c in value[1:]
    )


def _check_name(value: str) -> str:
    if _ID_SHAPE.fullmatch(value):
        raise ValueError("a name cannot have the shape of a prompt id (prompt_<32 hex>)")
    if not _is_name(value):
        raise ValueError(
            "name must be 1-128 characters: letters, digits, '_', '.', '-', "
            "starting with a letter, digit or '_'"
        )
    return value


def check_label(value: str) -> str:
    """Validate a label name."""
    if not _LABEL.fullmatch(value):
        raise ValueError("label must be 1-64 letters, digits, '_', '.', '-'")
    return value


def _check_settable_label(value: str) -> str:
    check_label(value)
    if value == "latest":
        raise ValueError("'latest' is reserved: it always means the newest version")
    return value


def _check_tags(value: list[str]) -> list[str]:
    for tag in value:
        if not 1 <= len(tag) <= 64 or tag != tag.strip():
            raise ValueError("each tag must be 1-64 characters without surrounding spaces")
    return list(dict.fromkeys(value))


def _check_folder(value: str | None) -> str | None:
    if value is None:
        return None
    parts = [p for p in value.strip().split("/") if p]
    if any(p in (".", "..") for p in parts) or len(value) > 256:
        raise ValueError("folder must be a path like /team/project, without '.' or '..'")
    return "/" + "/".join(parts)


def _check_parameters(value: dict[str, Any]) -> dict[str, Any]:
    ranges = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}
    for key, (low, high) in ranges.items():
        if key in value:
            number = value[key]
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise ValueError(f"parameters.{key} must be a number")
            if not low <= number <= high:
                raise ValueError(f"parameters.{key} must be between {low} and {high}")
    if "max_tokens" in value:
        tokens = value["max_tokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError("parameters.max_tokens must be a positive integer")
    return value


def public_id(prompt_id: str) -> str:
    """Return the ``prompt_<hex>`` form of a stored prompt id (the answers' ``id``)."""
    return f"prompt_{prompt_id}"


PromptName = Annotated[str, AfterValidator(_check_name)]
LabelName = Annotated[str, AfterValidator(_check_settable_label)]
Template = Annotated[str, Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]
Description = Annotated[str, Field(max_length=10_000)]
Tags = Annotated[list[str], Field(max_length=50), AfterValidator(_check_tags)]
Folder = Annotated[str | None, AfterValidator(_check_folder)]
Parameters = Annotated[
    dict[str, Any], AfterValidator(check_json), AfterValidator(_check_parameters)
]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _fits_type(value: Any, info: ValidationInfo) -> Any:
    """``template`` belongs to text prompts, ``messages`` to chat prompts: the other type's
    field is refused, and the own type's is required (an unknown ``type`` reads as text)."""
    chat = info.data.get("type") == "chat"
    own = (info.field_name == "messages") == chat
    if own and value is None:
        raise PydanticCustomError("missing", "Field required")
    if not own and value is not None:
        kind, other = ("text", "chat") if info.field_name == "template" else ("chat", "text")
        raise ValueError(
            f"{info.field_name} belongs to {kind} prompts; this is a {other} prompt "
            f"({'messages' if other == 'chat' else 'template'} holds its content)"
        )
    return value


SourceRunId = Annotated[
    str,
    Field(
        pattern=r"^pg_[0-9a-f]{32}$",
        description="The playground run (pg_<32 hex>) this version was saved from.",
    ),
]


class _VersionExtras(_Input):
    """The fields either type of prompt may carry on each version (docs/api-notes.md)."""

    tools: Tools | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    variables_schema: VariablesSchema | None = None
    config: Config | None = None


class PromptCreate(_VersionExtras):
    """``POST /v1/prompts``: name, model and the content (a text prompt's ``template``, a
    chat prompt's ``messages``) are required."""

    name: PromptName
    type: Literal["text", "chat"] = "text"
    template: Template | None = Field(default=None, validate_default=True)
    messages: Messages | None = Field(default=None, validate_default=True)
    model: ModelName
    description: Description = ""
    parameters: Parameters = Field(default_factory=dict)
    tags: Tags = Field(default_factory=list)
    folder: Folder = None
    labels: list[LabelName] = Field(default_factory=list, max_length=20)
    source_run_id: SourceRunId | None = None

    _content_fits_type = field_validator("template", "messages", mode="after")(_fits_type)


class PromptUpdate(_VersionExtras):
    """``PATCH /v1/prompts/{name}``: any prompt field; every PATCH makes a new version.

    ``tools``, ``tool_choice``, ``response_format``, ``variables_schema`` and ``config`` set to
    null remove them from the new version; ``type`` is fixed at create."""

    name: str | None = Field(default=None, description="Must equal the current name.")
    type: Literal["text", "chat"] | None = Field(
        default=None, description="Must equal the prompt's type (fixed at create)."
    )
    template: Template | None = None
    messages: Messages | None = None
    model: ModelName | None = None
    description: Description | None = None
    parameters: Parameters | None = None
    tags: Tags | None = None
    folder: Folder = None
    labels: list[LabelName] = Field(default_factory=list, max_length=20)
    source_run_id: SourceRunId | None = Field(
        default=None, description="Kept by the new version only (never inherited)."
    )

    @field_validator(
        "name",
        "type",
        "template",
        "messages",
        "model",
        "description",
        "parameters",
        "tags",
        mode="before",
    )
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Every version has these: null would make a version that silently keeps the old
        # value. Only `folder: null` means something (no folder).
        if value is None:
            raise ValueError("must not be null; leave the field out to keep its value")
        return value


class RollbackRequest(_Input):
    """``POST /v1/prompts/{name}/rollback``."""

    version: Annotated[int, Strict()] = Field(ge=1, le=2**31)
    labels: list[LabelName] = Field(default_factory=list, max_length=20)


class LabelMove(_Input):
    """``PUT /v1/prompts/{name}/labels/{label}``."""

    version: Annotated[int, Strict()] = Field(ge=1, le=2**31)


# A version's chat-prompt fields in the answers: each shown when the version has it, and
# ``type`` with them, so a text prompt without them answers exactly as before chat prompts.
_CHAT_FIELDS = ("messages", "tools", "tool_choice", "response_format", "variables_schema", "config")


class _ChatAnswer(RowModel):
    """The chat-prompt fields of a version answer (see :data:`_CHAT_FIELDS`)."""

    type: str = "text"
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    variables_schema: dict[str, Any] | None = None
    config: Any = None
    source_run_id: str | None = None

    # No return annotation: pydantic then documents the model's own fields in the OpenAPI
    # schema (an annotated wrap serializer would document its return type instead).
    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if data.get("source_run_id") is None:
            data.pop("source_run_id", None)
        for key in _CHAT_FIELDS:
            if data.get(key) is None:
                data.pop(key, None)
        if data.get("type") == "text" and not any(key in data for key in _CHAT_FIELDS):
            data.pop("type", None)
        return data


# A chat prompt stores no template (""): the answers say null.
TemplateOutField = Annotated[str | None, NoneIfEmpty]


class _PromptAnswer(_ChatAnswer):
    """A prompt answer read from a version's row: each answer keeps its own subset."""

    @classmethod
    def of_version(cls, row: PromptVersionRow) -> Self:
        """The answer of a prompt at ``row``: ``created_at`` is the prompt's creation,
        ``updated_at`` its newest version's."""
        return cls.of(
            row,
            id=public_id(row.prompt_id),
            created_at=row.prompt_created_at,
            updated_at=row.created_at,
        )


# A row keeps "no folder" as "": the answers say null.
FolderOut = Annotated[str | None, NoneIfEmpty]


class PromptOut(_PromptAnswer):
    """Create: every field of spec 2.1."""

    id: str
    name: str
    description: str
    template: TemplateOutField
    model: str
    parameters: dict[str, Any]
    version: int
    tags: list[str]
    folder: FolderOut
    created_at: datetime
    updated_at: datetime


class PromptGetOut(_PromptAnswer):
    """Get: the subset of spec 2.1, with the newest version's description, tags and folder."""

    id: str
    name: str
    template: TemplateOutField
    model: str
    version: int
    created_at: datetime
    description: str
    tags: list[str]
    folder: FolderOut


class PromptListItem(RowModel):
    """List item of spec 2.1, with the newest version's tags and folder."""

    id: str
    name: str
    description: str
    version: int
    created_at: datetime
    tags: list[str]
    folder: FolderOut

    @classmethod
    def of_head(cls, head: PromptHeadRow) -> PromptListItem:
        """A prompt in the list, from its head (its newest version's list fields)."""
        return cls.of(head, id=public_id(head.prompt_id), created_at=head.prompt_created_at)


class PromptUpdateOut(_PromptAnswer):
    """Update: the subset of spec 2.1."""

    id: str
    name: str
    template: TemplateOutField
    model: str
    version: int
    updated_at: datetime


class PromptDeleted(BaseModel):
    """Delete result."""

    deleted: bool
    id: str


class VersionOut(_ChatAnswer):
    """An item of the version history (spec 2.2), with its labels."""

    version: int
    template: TemplateOutField
    model: str
    labels: list[str]
    note: Annotated[str | None, NoneIfEmpty] = None
    created_at: datetime


class VersionDetailOut(VersionOut):
    """One version, with its parameters."""

    parameters: dict[str, Any]


class RollbackOut(_ChatAnswer):
    """Rollback result (spec 4.4)."""

    version: int
    template: TemplateOutField
    note: str


class LabelOut(BaseModel):
    """A label and the version it points at."""

    label: str
    version: int
    updated_at: datetime


class LabelRemoved(BaseModel):
    """Label removal result."""

    deleted: bool
    label: str


class VariableSpec(BaseModel):
    """The type of one template variable; a chat prompt's also says whether it is required."""

    type: str
    required: bool | None = None

    # No return annotation: the OpenAPI schema then documents the fields (see _ChatAnswer).
    @model_serializer(mode="wrap")
    def _required_when_known(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if data.get("required") is None:
            data.pop("required", None)
        return data


# The template payload's chat fields: a chat prompt's payload has each (null when unset); a
# text prompt's only those it has, so its payload is as before chat prompts but for ``type``.
_PAYLOAD_CHAT_FIELDS = ("messages", "placeholders", "tools", "tool_choice", "response_format")


class TemplateOut(BaseModel):
    """Template payload for local execution (spec 2.3), returned unwrapped.

    ``content`` is the text prompt's double-brace template (null for a chat prompt, whose
    ``messages`` are its unrendered Mustache, ``placeholders`` their names in order).
    """

    prompt_id: str
    prompt_name: str
    version: int
    version_id: str
    type: str = "text"
    content: str | None
    messages: list[dict[str, Any]] | None = None
    placeholders: list[str] | None = None
    variables: dict[str, VariableSpec]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    config: Any = None
    provider: str
    model: str
    temperature: float | None
    max_tokens: int | None

    # No return annotation: the OpenAPI schema then documents the fields (see _ChatAnswer).
    @model_serializer(mode="wrap")
    def _chat_fields_of_chat_prompts(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        for key in (*_PAYLOAD_CHAT_FIELDS, "config"):
            if data.get(key) is None and data.get("type") != "chat":
                data.pop(key, None)
        return data


class ChangeOut(BaseModel):
    """One change of a diff: ``before`` is left out of an addition, ``after`` of a removal
    (either may be a JSON ``null`` where the version holds one)."""

    path: str
    kind: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None

    # No return annotation: the OpenAPI schema then documents the fields (see _ChatAnswer).
    @model_serializer(mode="wrap")
    def _sides_it_has(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if self.kind == "added":
            data.pop("before", None)
        elif self.kind == "removed":
            data.pop("after", None)
        return data


class DiffOut(BaseModel):
    """The changes from version ``from`` to version ``to`` of a prompt."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    from_: int = Field(alias="from")
    to: int
    changes: list[ChangeOut]

    @classmethod
    def of_diff(cls, diff: VersionDiff) -> DiffOut:
        """The answer of a diff the service computed."""
        return cls(
            from_=diff.from_version,
            to=diff.to_version,
            changes=[
                ChangeOut(path=c.path, kind=c.kind, before=c.before, after=c.after)
                for c in diff.changes
            ],
        )
