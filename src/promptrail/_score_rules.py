"""What a score must be, for the SDK (which drops a bad score before it is queued) and the
collector (which refuses one with a 400): its name, its target, its id and its value.

Both sides read these rules from here, so ``promptrail.score()`` never queues a score the
collector would refuse for its name, target, id or value, and the two never drift apart.
Pure standard library and no other promptrail import: the collector imports this module
without loading the SDK's capture machinery.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

DataType = Literal["numeric", "boolean", "categorical"]
DATA_TYPES: tuple[DataType, ...] = ("numeric", "boolean", "categorical")
NAME_MAX_CHARS = 100
REQUEST_ID_MAX_CHARS = 200
SCORE_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,128}$"
TRACE_ID_PATTERN = r"^[0-9a-f]{32}$"
ONE_TARGET = "give exactly one of request_id and trace_id"

_SCORE_ID = re.compile(SCORE_ID_PATTERN)
_TRACE_ID = re.compile(TRACE_ID_PATTERN)


def name_problem(name: object) -> str | None:
    """Why ``name`` is no score name (1-100 characters), or None."""
    if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX_CHARS:
        return f"name must be a string of 1 to {NAME_MAX_CHARS} characters"
    return None


def target_problem(request_id: object, trace_id: object) -> str | None:
    """Why a (request_id, trace_id) pair names no single record or trace, or None if it does."""
    if (request_id is None) == (trace_id is None):
        return ONE_TARGET
    if request_id is not None and (
        not isinstance(request_id, str) or not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS
    ):
        return f"request_id must be a string of 1 to {REQUEST_ID_MAX_CHARS} characters"
    if trace_id is not None and not (isinstance(trace_id, str) and _TRACE_ID.fullmatch(trace_id)):
        return "trace_id must be 32 lowercase hex characters"
    return None


def score_id_problem(score_id: object) -> str | None:
    """Why ``score_id`` is no score id of a client's own (1-128 of ``[A-Za-z0-9_.:-]``), or None."""
    if not isinstance(score_id, str) or not _SCORE_ID.fullmatch(score_id):
        return "id must be 1-128 of [A-Za-z0-9_.:-]"
    return None


def infer_data_type(value: Any) -> DataType:
    """Return the type a value implies: boolean, numeric for a number, categorical for text."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "numeric"
    return "categorical"


def value_problem(value: Any, data_type: str) -> str | None:
    """Return why ``value`` is not a value of ``data_type`` (None when it is)."""
    if data_type == "boolean" and not isinstance(value, bool):
        return "a boolean score's value must be true or false"
    if data_type == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "a numeric score's value must be a number"
        try:
            if not math.isfinite(float(value)):
                return "a numeric score's value must be a finite number"
        except OverflowError:
            return "a numeric score's value is too large"
    if data_type == "categorical" and not isinstance(value, str):
        return "a categorical score's value must be a string"
    return None
