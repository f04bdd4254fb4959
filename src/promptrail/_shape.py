"""The base of every wire model the REST client returns (see :mod:`._types`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Shape(BaseModel):
    # Extra fields are kept: a collector that adds a field never breaks an older client.
    model_config = ConfigDict(extra="allow")
