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
        if not fields:
            return cls.model_validate(row)
        # The row's attributes as a dict, the given fields over them: validating a dict is
        # ~10x faster than reading the attributes through a wrapper (a list page's 100 items).
        own: dict[str, Any] = getattr(row, "__dict__", {})
        values = dict(fields)
        for name in _field_names(cls):
            if name in values:
                continue
            if name in own:
                values[name] = own[name]
            elif hasattr(row, name):  # a property, or a row without __dict__
                values[name] = getattr(row, name)
        return cls.model_validate(values)


# Each model's field names: ``model_fields`` is a descriptor that costs microseconds a read.
_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {}


def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(model)
    if names is None:
        names = _FIELD_NAMES[model] = tuple(model.model_fields)
    return names
