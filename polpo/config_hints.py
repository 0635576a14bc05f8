"""Which keys a config table takes, so a misspelt key gets a 'did you mean' (mission files already do)."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence

from pydantic import BaseModel

__all__ = ["keys_at"]


def keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names of the table at ``loc`` (a pydantic error's location without its last key), or [] when
    ``loc`` does not lead to a model (a free-form table such as ``[channels]``)."""
    current: object = model
    table_name_next = False  # after a dict-of-tables field, the next part is a table's own name ([agents.X])
    for part in loc:
        if table_name_next:
            table_name_next = False
            continue
        current = _model_of(current)
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = field.annotation
        if typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
            table_name_next = True
    current = _model_of(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _model_of(annotation: object) -> object:
    """The model inside ``X | None``; the annotation itself otherwise."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else annotation
    return annotation
