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
    """Wrap every method not wrapped by us yet; return how many were wrapped now.

    Another instrumentation's wrapper (OpenLLMetry's stays on a method even after its
    ``uninstrument()``) is wrapped in turn, not mistaken for ours.
    """
    applied = 0
    with _lock:
        for patch in patches:
            owner, attribute = _resolve(patch)
            if owner is None or _find(_raw(owner, attribute), patch.wrapper)[1] is not None:
                continue
            wrapt.wrap_function_wrapper(owner, attribute, patch.wrapper)
            applied += 1
    return applied


def remove(patches: tuple[Patch, ...]) -> None:
    """Take our wrappers out, leaving any other instrumentation's wrappers in place."""
    with _lock:
        for patch in patches:
            owner, attribute = _resolve(patch)
            if owner is None:
                continue
            outer, ours = _find(_raw(owner, attribute), patch.wrapper)
            if ours is None:
                continue
            if outer is None:
                setattr(owner, attribute, ours.__wrapped__)
            else:  # wrapped again by someone else since: unlink ours from under theirs
                outer.__wrapped__ = ours.__wrapped__


def _find(
    method: Any, wrapper: Callable[..., Any]
) -> tuple[wrapt.FunctionWrapper[Any, Any] | None, wrapt.FunctionWrapper[Any, Any] | None]:
    """Return (the wrapper just outside ours, ours) in a chain of wrappers, or Nones."""
    outer = None
    while isinstance(method, wrapt.FunctionWrapper):
        if method._self_wrapper is wrapper:
            return outer, method
        outer, method = method, method.__wrapped__
    return None, None


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
