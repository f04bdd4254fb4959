"""Apply and remove wrapt patches symmetrically, idempotently and thread-safely."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wrapt


@dataclass(frozen=True)
class Patch:
    """One method to wrap: module, dotted attribute path in it, and the wrapper."""

    module: str
    name: str
    wrapper: Callable[..., Any]


_lock = threading.Lock()


def apply(patches: tuple[Patch, ...]) -> int:
    """Wrap every method not wrapped yet; return how many were wrapped now."""
    applied = 0
    with _lock:
        for patch in patches:
            owner, attribute = _resolve(patch)
            if owner is None or isinstance(_raw(owner, attribute), wrapt.FunctionWrapper):
                continue
            wrapt.wrap_function_wrapper(owner, attribute, patch.wrapper)
            applied += 1
    return applied


def remove(patches: tuple[Patch, ...]) -> None:
    """Restore every wrapped method."""
    with _lock:
        for patch in patches:
            owner, attribute = _resolve(patch)
            current = _raw(owner, attribute) if owner is not None else None
            if isinstance(current, wrapt.FunctionWrapper):
                setattr(owner, attribute, current.__wrapped__)


def _raw(owner: Any, attribute: str) -> Any:
    # The class's own entry, not what the descriptor protocol hands out.
    return (
        vars(owner).get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
    )


def _resolve(patch: Patch) -> tuple[Any, str]:
    try:
        owner: Any = importlib.import_module(patch.module)
    except ImportError:
        return None, ""
    *path, attribute = patch.name.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None, ""
    return owner, attribute
