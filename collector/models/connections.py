"""Wire models of provider connections (docs/api-notes.md, "Connections").

The API key and the header values come in and never go out: a connection shows
``api_key_hint`` and the names of its headers only. No validation message repeats a value.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

CONNECTION_NAME_PATTERN = r"^[a-z0-9_-]{1,64}$"
MAX_HEADERS = 20
MAX_MODELS = 200
# A header name is an HTTP token; a value one line of printable ASCII (what the HTTP client
# sends as it is); a key printable ASCII without spaces (it travels in a header).
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]{0,4096}$")
_API_KEY = re.compile(r"^[\x21-\x7e]+$")
# Headers a connection may not set: the provider's own authentication and the request framing.
RESERVED_HEADERS = frozenset(
    {"authorization", "x-api-key", "host", "content-length", "content-type", "transfer-encoding"}
)

Provider = Literal["openai", "anthropic", "openai_compatible"]
ConnectionName = Annotated[str, Field(pattern=CONNECTION_NAME_PATTERN)]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]


def _api_key(value: str) -> str:
    if not _API_KEY.fullmatch(value):
        raise ValueError("the API key must be printable ASCII without spaces")
    return value


def _headers(value: dict[str, str]) -> dict[str, str]:
    for name, text in value.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError("a header name is letters, digits and -_.!#$%&'*+^`|~")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header '{name}' is set by the collector itself")
        if not _HEADER_VALUE.fullmatch(text):
            # The value is secret: the message names the header only.
            raise ValueError(f"header '{name}' has a value that is not one line of ASCII text")
    return value


ApiKey = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_api_key)]
Headers = Annotated[dict[str, str], Field(max_length=MAX_HEADERS), AfterValidator(_headers)]
BaseUrl = Annotated[str, Field(min_length=1, max_length=2048)]
Budget = Annotated[float, Field(ge=0, le=1_000_000_000)]
Models = Annotated[list[ModelName], Field(max_length=MAX_MODELS)]


class ConnectionIn(BaseModel):
    """``POST /v1/connections``."""

    model_config = ConfigDict(extra="forbid")

    name: ConnectionName
    provider: Provider
    api_key: ApiKey
    base_url: BaseUrl | None = None
    models: Models = Field(default_factory=list)
    headers: Headers = Field(default_factory=dict)
    monthly_budget_usd: Budget | None = None


class ConnectionPatch(BaseModel):
    """``PATCH /v1/connections/{name}``: the fields given replace the stored ones (``headers``
    as a whole map); ``null`` clears ``base_url``, ``monthly_budget_usd``, ``models`` or
    ``headers``."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider | None = None
    api_key: ApiKey | None = None
    base_url: BaseUrl | None = None
    models: Models | None = None
    headers: Headers | None = None
    monthly_budget_usd: Budget | None = None


class ConnectionOut(BaseModel):
    """A connection as the API shows it: never its key or its header values."""

    name: str
    provider: Provider
    base_url: str | None
    models: list[str]
    header_names: list[str] = Field(description="The names of its headers; values are secret.")
    api_key_hint: str = Field(description='"…" and the key\'s last 4 characters')
    monthly_budget_usd: float | None
    spend_this_month_usd: float
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None


class CheckOut(BaseModel):
    """``POST /v1/connections/{name}/check``."""

    ok: bool
    status: Literal["ok", "auth_invalid", "unreachable", "quota_exceeded", "error"]
    message: str
    latency_ms: int
