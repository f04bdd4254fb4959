"""Response bodies of registry reads, encoded once per version and kept.

A version is immutable once stored (its ``version_id`` names one row forever), so the JSON
bytes a read route answers for it never change: encoding them once and answering the same
bytes again spares each hot read the response model's validation and the JSON encoder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from ...models.envelopes import Data
from ...models.prompts import PromptGetOut
from ...store.prompts import PromptVersionRow
from ..templates import template_payload

Shape = Literal["get", "template"]
# Bodies kept at most; past it the oldest half goes (a read only re-encodes what it needs).
_MAX_BODIES = 20_000


def encode_body(model: BaseModel) -> bytes:
    """The bytes FastAPI writes for ``model`` returned from a route with that response model
    and the default response class: pydantic's own JSON of it, by alias."""
    return model.model_dump_json(by_alias=True).encode()


def _get_body(row: PromptVersionRow) -> Data[PromptGetOut]:
    return Data(data=PromptGetOut.of_version(row))


# The answer of each read route, as its response model: get a prompt (its newest version's
# subset, in ``data``) and the template payload (unwrapped).
_BUILD: dict[Shape, Callable[[PromptVersionRow], BaseModel]] = {
    "get": _get_body,
    "template": template_payload,
}


class EncodedBodies:
    """JSON bodies of read routes by (version id, shape); thread-safe, bounded."""

    def __init__(self, limit: int = _MAX_BODIES) -> None:
        self._limit = limit
        self._bodies: dict[tuple[str, Shape], bytes] = {}
        self._lock = threading.Lock()

    def body(self, row: PromptVersionRow, shape: Shape) -> bytes:
        """Return the body of ``row`` in ``shape``, encoding its answer the first time."""
        key = (row.version_id, shape)
        found = self._bodies.get(key)
        if found is not None:
            return found
        encoded = encode_body(_BUILD[shape](row))
        with self._lock:
            if len(self._bodies) >= self._limit:
                # dicts keep insertion order: drop the older half.
                for old in list(self._bodies)[: self._limit // 2]:
                    del self._bodies[old]
            self._bodies[key] = encoded
        return encoded
