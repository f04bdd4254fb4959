"""Response models read from rows by attribute.

A service hands a route its rows (the store's dataclasses, or the service's own results); a
response model whose fields are the row's attributes of the same names is built from the row
itself (pydantic's ``from_attributes``), so a field is added or renamed in one place: the
model. What a row does not hold as such (a field computed from others, a renamed one, the
row's ``0`` or ``""`` shown as ``null``) is said beside the model: a :data:`NoneIfEmpty`
annotation, or the few fields a model's ``of_…`` class method passes to :meth:`RowModel.of`.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict


def _none_if_empty(value: Any) -> Any:
    # A stored row keeps "no value" as its column's zero ("" or 0); the wire says null.
    return value or None


NoneIfEmpty = BeforeValidator(_none_if_empty)
"""A field the row stores as ``""`` or ``0`` when absent, answered as ``null``."""


class RowModel(BaseModel):
    """A response model that reads its fields from a row's attributes of the same names."""

    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, row: object, **fields: Any) -> Self:
        """Return the model of ``row``: each field its attribute, but those of ``fields``."""
        return cls.model_validate(_Overlay(row, fields) if fields else row)


class _Overlay:
    """A row seen with some attributes given instead of (or beside) its own."""

    __slots__ = ("_fields", "_row")

    def __init__(self, row: object, fields: dict[str, Any]) -> None:
        self._row = row
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        fields = self._fields
        return fields[name] if name in fields else getattr(self._row, name)
