"""Playground run shapes (docs/api-notes.md, "Playground"): the body of
``POST /v1/playground/runs`` and its answer, and of ``POST /v1/playground/estimates``."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from .chat_prompts import Config, Messages, ResponseFormat, ToolChoice, Tools, VariablesSchema
from .json_values import check_json
from .prompts import (
    Description,
    Folder,
    ModelName,
    Parameters,
    Tags,
    Template,
    _fits_type,
    check_label,
)
from .runs import RunUsage

MAX_MODELS = 10
MAX_REPETITIONS = 10
MAX_DATASET_ITEMS = 100
# A run's cells: items (or the variables) x models x repetitions (10 x 10 x 100 at most).
MAX_CELLS = MAX_DATASET_ITEMS * MAX_MODELS * MAX_REPETITIONS


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InlinePrompt(_Input):
    """A prompt given in full: a version's fields (nothing is stored)."""

    type: Literal["text", "chat"] = "text"
    template: Template | None = Field(default=None, validate_default=True)
    messages: Messages | None = Field(default=None, validate_default=True)
    model: ModelName
    parameters: Parameters = Field(default_factory=dict)
    tools: Tools | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    variables_schema: VariablesSchema | None = None
    config: Config | None = None

    _content_fits_type = field_validator("template", "messages", mode="after")(_fits_type)


class PromptOverrides(_Input):
    """Fields laid over a stored version, each replacing the version's own, as a PATCH
    setting them would; an extra set to null leaves it out. ``type`` must be the prompt's;
    ``description``, ``tags`` and ``folder`` are taken and change nothing a cell sends."""

    type: Literal["text", "chat"] | None = None
    description: Description | None = None
    tags: Tags | None = None
    folder: Folder = None
    template: Template | None = None
    messages: Messages | None = None
    model: ModelName | None = None
    parameters: Parameters | None = None
    tools: Tools | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    variables_schema: VariablesSchema | None = None
    config: Config | None = None

    @field_validator("template", "messages", "model", "parameters", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null; leave the field out to keep the version's")
        return value


class StoredPrompt(_Input):
    """A stored version: the newest, a number or a label, with overrides."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    version: Annotated[int, Strict()] | None = Field(default=None, ge=1, le=2**31)
    label: Annotated[str, AfterValidator(check_label)] | None = None
    overrides: PromptOverrides | None = None

    @model_validator(mode="after")
    def _one_way(self) -> StoredPrompt:
        if self.version is not None and self.label is not None:
            raise ValueError("give version or label, not both")
        return self


def _prompt_kind(value: Any) -> str:
    return "stored" if isinstance(value, dict) and "name" in value else "inline"


PlaygroundPrompt = Annotated[
    Annotated[InlinePrompt, Tag("inline")] | Annotated[StoredPrompt, Tag("stored")],
    Discriminator(_prompt_kind),
]


class DatasetPick(_Input):
    """A dataset's first items, in item order."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    limit: Annotated[int, Strict()] = Field(default=MAX_DATASET_ITEMS, ge=1, le=MAX_DATASET_ITEMS)


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


class PlaygroundRunIn(_Input):
    """``POST /v1/playground/runs``."""

    prompt: PlaygroundPrompt
    variables: Annotated[dict[str, Any], AfterValidator(check_json)] | None = None
    placeholders: dict[str, list[dict[str, Any]]] | None = None
    models: Annotated[list[ModelName], Field(min_length=1, max_length=MAX_MODELS)] | None = None
    repetitions: Annotated[int, Strict()] = Field(default=1, ge=1, le=MAX_REPETITIONS)
    dataset: DatasetPick | None = None
    max_cost_usd: Annotated[float | None, AfterValidator(_finite)] = Field(default=None, ge=0)
    stream: bool = False

    @model_validator(mode="after")
    def _inputs(self) -> PlaygroundRunIn:
        if self.dataset is not None and self.variables is not None:
            raise ValueError("give variables or a dataset, not both")
        if self.models is not None and len(set(self.models)) != len(self.models):
            raise ValueError("models must be distinct")
        return self


class CellHead(BaseModel):
    """What a cell is: its number, model (as written), dataset item and repetition."""

    cell: int
    model: str
    item_id: str | None = None
    repetition: int

    # No return annotation: pydantic then documents the model's own fields.
    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        for key in ("item_id", "error", "tool_calls"):
            if key in data and data[key] is None:
                del data[key]
        return data


class PlaygroundCell(CellHead):
    """A finished cell: its record, output, usage, timings and cost."""

    request_id: str | None = Field(description="The cell's record; null when nothing was called.")
    output: str
    usage: RunUsage
    latency_ms: int
    time_to_first_token_ms: int | None
    estimated_cost_usd: float
    cost_known: bool
    status: Literal["success", "error"]
    error: dict[str, Any] | None = Field(
        default=None, description="A failed cell's error, as the API's error bodies carry it."
    )
    tool_calls: list[dict[str, str]] | None = Field(
        default=None, description="The tools the model called, when it called any."
    )


class PlaygroundRunOut(BaseModel):
    """A playground run's answer."""

    id: str = Field(description="pg_<hex>: the records' metadata.playground_run_id.")
    estimated_cost_usd: float = Field(description="The estimate made before anything ran.")
    estimate_method: Literal["tiktoken", "approximate"]
    estimated_input_tokens: int
    estimated_output_tokens: int
    cost_usd: float = Field(description="The cells' cost, summed.")
    cells: list[PlaygroundCell]


class CellEstimate(CellHead):
    """A cell of an estimate: what it is and what it is estimated to cost."""

    estimated_cost_usd: float = Field(
        description="0 for a cell that cannot run (a dataset item the prompt cannot render)."
    )


class PlaygroundEstimateOut(BaseModel):
    """``POST /v1/playground/estimates``: the estimate a run of the same body would make."""

    estimated_cost_usd: float
    estimated_input_tokens: int
    estimated_output_tokens: int
    estimate_method: Literal["tiktoken", "approximate"]
    cells: list[CellEstimate]
