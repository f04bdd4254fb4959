"""The shapes of a chat prompt's version fields (docs/api-notes.md, Chat prompts).

``messages`` (chat messages and placeholders), ``tools``, ``tool_choice``,
``response_format``, ``variables_schema`` and ``config``, as the OpenAI chat API writes them.
Each is validated here, so a bad one is a 400 VALIDATION_ERROR naming its field; JSON Schemas
(``variables_schema``, a tool's ``parameters``, a JSON-schema answer's ``schema``) are checked
with jsonschema against their own meta-schema. Whether a message's text parses as Mustache is
checked where the version is built (an INVALID_TEMPLATE, not a validation error).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import jsonschema  # type: ignore[import-untyped]
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from .json_values import check_json

MAX_MESSAGES = 500
MAX_TEXT_CHARS = 1024 * 1024
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLACEHOLDER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def check_json_schema(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse a value that is not a valid JSON Schema (by its ``$schema``, else 2020-12)."""
    check_json(value)
    validator = jsonschema.validators.validator_for(value, jsonschema.Draft202012Validator)
    try:
        validator.check_schema(value)
    except jsonschema.SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        raise ValueError(
            f"not a valid JSON Schema: {error.message}" + (f" (at /{where})" if where else "")
        ) from None
    return value


def _object_schema(value: dict[str, Any]) -> dict[str, Any]:
    if value.get("type") != "object":
        raise ValueError('the variables schema must be a JSON Schema of "type": "object"')
    return value


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
JsonSchema = Annotated[dict[str, Any], AfterValidator(check_json_schema)]


class TextPart(_Shape):
    """``{"type": "text", "text"}``: Mustache may stand in ``text``."""

    type: Literal["text"]
    text: Text


class ImageUrl(_Shape):
    """An image's URL (Mustache may stand in it) and the detail asked of the model."""

    url: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Shape):
    """``{"type": "image_url", "image_url": {"url", "detail"?}}``."""

    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]
_PARTS: TypeAdapter[list[TextPart | ImagePart]] = TypeAdapter(
    Annotated[list[ContentPart], Field(min_length=1, max_length=100)]
)


def _content(value: Any) -> Any:
    # Checked by hand rather than as a union, so an error names ``content`` itself and not
    # one of the union's members; parts are kept as the JSON they store.
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise ValueError(f"content is at most {MAX_TEXT_CHARS} characters")
        return check_json(value)
    if isinstance(value, list):
        try:
            parts = _PARTS.validate_python(value)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"part {where}: {first['msg']}" if where else str(first["msg"])
            ) from None
        return [part.model_dump(mode="json", exclude_none=True) for part in parts]
    raise ValueError(
        'content is a string or a list of parts ({"type": "text", "text"} or '
        '{"type": "image_url", "image_url": {"url"}})'
    )


class ToolCallFunction(_Shape):
    """The function an assistant message's tool call names, and its JSON arguments."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    arguments: Annotated[str, Field(max_length=MAX_TEXT_CHARS)]


class ToolCall(_Shape):
    """A tool call of an assistant message (a few-shot example's)."""

    id: Annotated[str, Field(min_length=1, max_length=256)]
    type: Literal["function"]
    function: ToolCallFunction


class ChatMessage(_Shape):
    """A message, ``{"role", "content", "name"?, "tool_call_id"?, "tool_calls"?}``, or a
    placeholder, ``{"type": "placeholder", "name"}``, that a run or a compile fills with a
    list of messages."""

    type: Literal["placeholder"] | None = None
    role: Literal["system", "developer", "user", "assistant", "tool"] | None = None
    content: Annotated[Any, AfterValidator(_content)] = None
    name: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    tool_call_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    tool_calls: Annotated[list[ToolCall], Field(min_length=1, max_length=128)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ChatMessage:
        if self.type == "placeholder":
            extra = [
                f for f in ("role", "content", "tool_call_id", "tool_calls") if getattr(self, f)
            ]
            if extra or self.name is None or not _PLACEHOLDER_NAME.fullmatch(self.name):
                raise ValueError(
                    'a placeholder is {"type": "placeholder", "name"} alone, its name an '
                    "identifier (letters, digits, '_')"
                )
            return self
        if self.role is None:
            raise ValueError(
                "a message needs a role (system, developer, user, assistant or tool), or "
                '"type": "placeholder"'
            )
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("a message needs content (an assistant's may have tool_calls)")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an assistant message has tool_calls")
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self


def _distinct_placeholders(value: list[ChatMessage]) -> list[ChatMessage]:
    names = [m.name for m in value if m.type == "placeholder"]
    if len(names) != len(set(names)):
        raise ValueError("each placeholder's name must be distinct")
    return value


Messages = Annotated[
    list[ChatMessage],
    Field(min_length=1, max_length=MAX_MESSAGES),
    AfterValidator(_distinct_placeholders),
]


class FunctionDefinition(_Shape):
    """A tool's function: name, description and its parameters' JSON Schema."""

    name: str
    description: Annotated[str, Field(max_length=10_000)] | None = None
    parameters: JsonSchema
    strict: bool | None = None

    @model_validator(mode="after")
    def _name_shape(self) -> FunctionDefinition:
        if not _FUNCTION_NAME.fullmatch(self.name):
            raise ValueError("a function's name is 1-64 letters, digits, '_' or '-'")
        return self


class Tool(_Shape):
    """``{"type": "function", "function": {"name", "description"?, "parameters"}}``."""

    type: Literal["function"]
    function: FunctionDefinition


def _distinct_tools(value: list[Tool]) -> list[Tool]:
    names = [t.function.name for t in value]
    if len(names) != len(set(names)):
        raise ValueError("each tool's function name must be distinct")
    return value


Tools = Annotated[list[Tool], Field(max_length=128), AfterValidator(_distinct_tools)]


class NamedFunction(_Shape):
    """The function a forced tool choice names."""

    name: Annotated[str, Field(min_length=1, max_length=64)]


class NamedToolChoice(_Shape):
    """``{"type": "function", "function": {"name"}}``: the model must call that tool."""

    type: Literal["function"]
    function: NamedFunction


_CHOICES = ("auto", "none", "required")


def _tool_choice(value: Any) -> Any:
    # Checked by hand rather than as a union, so an error names ``tool_choice`` itself and
    # not one of the union's members.
    if isinstance(value, str) and value in _CHOICES:
        return value
    if isinstance(value, dict):
        try:
            return NamedToolChoice.model_validate(value)
        except ValidationError:
            pass
    raise ValueError(
        'tool_choice is "auto", "none", "required" or {"type": "function", "function": {"name"}}'
    )


ToolChoice = Annotated[Any, AfterValidator(_tool_choice)]


class JsonSchemaFormat(_Shape):
    """A JSON-schema answer's name, schema and strictness."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: Annotated[str, Field(max_length=10_000)] | None = None
    # ``schema`` is a BaseModel attribute: the field is held under another name.
    schema_: JsonSchema = Field(alias="schema")
    strict: bool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TextFormat(_Shape):
    """``{"type": "text" | "json_object"}``."""

    type: Literal["text", "json_object"]


class JsonSchemaResponse(_Shape):
    """``{"type": "json_schema", "json_schema": {"name", "schema", "strict"?}}``."""

    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormat = Annotated[TextFormat | JsonSchemaResponse, Field(discriminator="type")]
VariablesSchema = Annotated[
    dict[str, Any], AfterValidator(check_json_schema), AfterValidator(_object_schema)
]
Config = Annotated[Any, AfterValidator(check_json)]


def stored(value: Any) -> Any:
    """A validated field as the JSON the version stores and answers (unset keys left out)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [stored(item) for item in value]
    return value
