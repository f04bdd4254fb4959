"""The difference between two versions of a prompt (docs/api-notes.md, Chat prompts: Diff).

:func:`diff_versions` is pure: it compares two version rows field by field and returns each
change with the path of what changed. Messages are compared by position
(``messages[2].content``), tools by their function's name (``tools.get_weather...``, a tool
only one side has added or removed whole), and every JSON object key by key, so a tool's
``parameters``, a JSON-schema answer's ``schema``, the ``variables_schema``, the
``parameters`` and ``config`` each say which key changed
(``tools.get_weather.parameters.properties.unit``). Any other value (text, a number, a list
such as ``required`` or ``tags``) is compared whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ...store.prompts import PromptVersionRow

Kind = Literal["added", "removed", "changed"]
# The sentinel for "this side has no value here" (a JSON null is a value: ``None``).
_ABSENT: Any = object()


@dataclass(frozen=True)
class Change:
    """One change: ``before`` is absent from an addition, ``after`` from a removal."""

    path: str
    kind: Kind
    before: Any = None
    after: Any = None


@dataclass(frozen=True)
class VersionDiff:
    """The changes from version ``from_version`` to version ``to_version``."""

    from_version: int
    to_version: int
    changes: list[Change]


def diff_versions(before: PromptVersionRow, after: PromptVersionRow) -> list[Change]:
    """Return what changed from ``before`` to ``after``, field by field in a fixed order."""
    changes: list[Change] = []
    for field, old, new in (
        ("description", before.description or _ABSENT, after.description or _ABSENT),
        ("model", before.model or _ABSENT, after.model or _ABSENT),
        ("template", before.template or _ABSENT, after.template or _ABSENT),
        ("folder", before.folder or _ABSENT, after.folder or _ABSENT),
        ("tags", before.tags or _ABSENT, after.tags or _ABSENT),
    ):
        _compare(field, old, new, changes)
    _compare_messages(before.messages or [], after.messages or [], changes)
    _compare_tools(before.tools or [], after.tools or [], changes)
    for field in ("tool_choice", "response_format"):
        _compare(field, _present(getattr(before, field)), _present(getattr(after, field)), changes)
    # Parameters one by one: a version without any has none of them.
    _compare("parameters", before.parameters or {}, after.parameters or {}, changes)
    for field in ("variables_schema", "config"):
        _compare(field, _present(getattr(before, field)), _present(getattr(after, field)), changes)
    return changes


def _present(value: Any) -> Any:
    # A version without a chat-prompt field stores None: it has no value there.
    return _ABSENT if value is None else value


def _compare_messages(
    old: list[dict[str, Any]], new: list[dict[str, Any]], changes: list[Change]
) -> None:
    for index in range(max(len(old), len(new))):
        _compare(
            f"messages[{index}]",
            old[index] if index < len(old) else _ABSENT,
            new[index] if index < len(new) else _ABSENT,
            changes,
        )


def _tools_by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    # A stored tool is {"type": "function", "function": {"name", ...}}; names are distinct.
    return {str(tool.get("function", {}).get("name")): tool for tool in tools}


def _compare_tools(
    old: list[dict[str, Any]], new: list[dict[str, Any]], changes: list[Change]
) -> None:
    old_by_name, new_by_name = _tools_by_name(old), _tools_by_name(new)
    names = list(old_by_name) + [name for name in new_by_name if name not in old_by_name]
    for name in names:
        path = f"tools.{name}"
        if name not in new_by_name:
            changes.append(Change(path, "removed", before=old_by_name[name]))
        elif name not in old_by_name:
            changes.append(Change(path, "added", after=new_by_name[name]))
        else:
            # The function's fields under the tool's name (its description, parameters,
            # strict); the tool's own ``type`` is always "function".
            was, now = old_by_name[name], new_by_name[name]
            _compare(path, was.get("function", {}), now.get("function", {}), changes)
            _compare(f"{path}.type", was.get("type", _ABSENT), now.get("type", _ABSENT), changes)


def _compare(path: str, old: Any, new: Any, changes: list[Change]) -> None:
    """Add the changes from ``old`` to ``new`` at ``path``: objects key by key, else whole."""
    if old is _ABSENT and new is _ABSENT:
        return
    if old is _ABSENT:
        changes.append(Change(path, "added", after=new))
    elif new is _ABSENT:
        changes.append(Change(path, "removed", before=old))
    elif isinstance(old, dict) and isinstance(new, dict):
        keys = list(old) + [key for key in new if key not in old]
        for key in keys:
            _compare(f"{path}.{key}", old.get(key, _ABSENT), new.get(key, _ABSENT), changes)
    elif not _same(old, new):
        changes.append(Change(path, "changed", before=old, after=new))


def _same(old: Any, new: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` (as Python's ``==`` has it), ``1`` is ``1.0``."""
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_same(old[k], new[k]) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    if isinstance(old, int | float) and isinstance(new, int | float):
        return old == new
    return type(old) is type(new) and old == new
