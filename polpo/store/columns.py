"""A record's columns declared once: its table's column names, record → row and row → record come from one list.

A column is its name and its codec (how the record's value is stored: as is, an enum's value, an ISO time, a 0/1
flag, JSON text). From the list, :class:`Columns` compiles the two conversions into plain functions, once, the way
``dataclasses`` writes ``__init__``: a row costs what the hand-written tuple cost (a task row is written three or
four times a turn), and a new column is one line here beside its field in ``polpo/model/records.py`` (and the
schema migrations, which are history and stay written out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

import orjson

from polpo.clock import iso, parse_iso

__all__ = ["FLAG", "FLAG_OR_NONE", "JSON", "PLAIN", "TIME", "TIME_OR_NONE", "Codec", "Col", "Columns", "enum", "loaded_json",
           "loaded_time", "stored_json", "stored_time"]


def stored_time(v: datetime | None) -> str | None:
    return iso(v) if v is not None else None


def stored_json(v: Any) -> str | None:
    return orjson.dumps(v).decode() if v is not None else None


def loaded_time(v: str | None) -> datetime | None:
    return parse_iso(v) if v else None


def loaded_json(v: str | None) -> Any:
    return orjson.loads(v) if v else None


@dataclass(frozen=True)
class Codec:
    """How a value is stored: ``store`` and ``load`` are expressions with ``{}`` for the value, over ``names``."""

    store: str = "{}"
    load: str = "{}"
    names: Mapping[str, Any] = field(default_factory=dict)


PLAIN = Codec()
TIME = Codec("iso({})", "parse_iso({})", {"iso": iso, "parse_iso": parse_iso})
TIME_OR_NONE = Codec("stored_time({})", "loaded_time({})",  # None stays NULL
                     {"stored_time": stored_time, "loaded_time": loaded_time})
FLAG = Codec("int({})", "bool({})")
FLAG_OR_NONE = Codec("(None if {0} is None else int({0}))", "(None if {0} is None else bool({0}))")  # None: NULL
JSON = Codec("stored_json({})", "loaded_json({})",  # None stays NULL
             {"stored_json": stored_json, "loaded_json": loaded_json})


def enum(cls: type[Enum]) -> Codec:
    """A StrEnum stored as its value."""
    return Codec("{}.value", f"{cls.__name__}({{}})", {cls.__name__: cls})


@dataclass(frozen=True)
class Col:
    name: str  # the column, and the record's attribute
    codec: Codec = PLAIN


class Columns:
    """The columns of one table, in order, and the conversions made from them."""

    def __init__(self, *cols: Col | str) -> None:
        self.cols = tuple(c if isinstance(c, Col) else Col(c) for c in cols)
        self.names = tuple(c.name for c in self.cols)
        self._ns: dict[str, Any] = {}
        for c in self.cols:
            self._ns.update(c.codec.names)

    def to_row(self) -> Callable[[Any], tuple[Any, ...]]:
        """``record → row``: the tuple of stored values in column order."""
        values = ", ".join(c.codec.store.format(f"o.{c.name}") for c in self.cols)
        return self._compile(f"def to_row(o):\n    return ({values},)\n", "to_row")

    def from_row(self, cls: type, params: str = "", **given: str) -> Callable[..., Any]:
        """``(row, *params) → record``: ``cls`` built from the row's columns by name; ``given`` are attributes
        taken from ``params`` instead (``mission_id="m.id"``), or that are no column at all (``doc="m.doc"``)."""
        args = [f"{c.name}={given.pop(c.name) if c.name in given else c.codec.load.format(repr_key(c.name))}"
                for c in self.cols]
        args += [f"{k}={v}" for k, v in given.items()]
        head = ", ".join(["r", *([params] if params else [])])
        return self._compile(f"def from_row({head}):\n    return cls({', '.join(args)})\n", "from_row", cls=cls)

    def _compile(self, src: str, name: str, **extra: Any) -> Callable[..., Any]:
        ns = {**self._ns, **extra}
        exec(compile(src, f"<columns {name}>", "exec"), ns)
        fn: Callable[..., Any] = ns[name]
        return fn


def repr_key(name: str) -> str:
    return f"r[{name!r}]"
