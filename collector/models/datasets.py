"""Wire models of datasets and their items (docs/api-notes.md, "Datasets and experiments")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .json_values import check_json
from .requests import Metadata, MetadataFilter
from .rows import RowModel

DATASET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
ITEM_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,128}$"
MAX_ITEMS_PER_POST = 1000
MAX_FROM_REQUESTS = 10_000

DatasetName = Annotated[str, Field(pattern=DATASET_NAME_PATTERN)]
ItemId = Annotated[str, Field(pattern=ITEM_ID_PATTERN)]
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json)]
# A string or a JSON object, as the contract allows.
ExpectedOutput = Annotated[str | dict[str, Any], AfterValidator(check_json)]


class DatasetIn(BaseModel):
    """``POST /v1/datasets``."""

    model_config = ConfigDict(extra="forbid")

    name: DatasetName
    description: Annotated[str, Field(max_length=10_000)] | None = None
    metadata: Metadata = Field(default_factory=dict)


class DatasetOut(RowModel):
    """A dataset."""

    id: str = Field(description="dataset_<32 hex>")
    name: str
    description: str | None
    metadata: dict[str, Any]
    item_count: int
    created_at: datetime


class ItemIn(BaseModel):
    """One item of ``POST /v1/datasets/{name}/items`` (each validated alone)."""

    model_config = ConfigDict(extra="forbid")

    id: ItemId | None = None
    input_variables: JsonObject
    expected_output: ExpectedOutput | None = None
    metadata: Metadata = Field(default_factory=dict)


class ItemsIn(BaseModel):
    """``POST /v1/datasets/{name}/items``: a bad item is rejected by index, the rest stored."""

    model_config = ConfigDict(extra="forbid")

    items: Annotated[list[Any], Field(max_length=MAX_ITEMS_PER_POST)]


class ItemOut(RowModel):
    """A dataset item."""

    id: str
    input_variables: dict[str, Any]
    expected_output: str | dict[str, Any] | None
    metadata: dict[str, Any]
    source_request_id: str | None
    created_at: datetime


class RequestFilters(BaseModel):
    """The request list's filters, as a body (score filters as ``score.<name>[.min|.max]``
    and ``unscored`` keys)."""

    model_config = ConfigDict(extra="allow")

    prompt_name: Annotated[str, Field(max_length=128)] | None = None
    status: Annotated[str, Field(pattern=r"^(success|error)$")] | None = None
    start_date: Annotated[str, Field(max_length=40)] | None = None
    end_date: Annotated[str, Field(max_length=40)] | None = None
    metadata: MetadataFilter = Field(default_factory=dict)


class FromRequestsIn(BaseModel):
    """``POST /v1/datasets/{name}/items/from-requests``."""

    model_config = ConfigDict(extra="forbid")

    filters: RequestFilters = Field(default_factory=RequestFilters)
    limit: Annotated[int, Field(ge=1, le=MAX_FROM_REQUESTS)] = 1000
    output_as_expected: bool = False


class AcceptedOut(BaseModel):
    """``{"accepted": n}`` of the items made from the log."""

    accepted: int
