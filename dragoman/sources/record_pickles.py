"""Pickles of parsed records, as the parse worker hands them to its caller.

A record is mostly frozen slotted dataclasses (the objects, their parts, their errors).
Python pickles those through `dataclasses`' own `__getstate__`/`__setstate__`, which look up
the class's fields again for every instance: half the time of pickling and unpickling 10,000
files' records. Here each instance is written as its class and its fields' values, taken by
one attribute getter per class, and rebuilt by setting its slots from a per-class list of
names: the same values, no field look-ups.
"""

from __future__ import annotations

import dataclasses
import io
import operator
import pickle
from collections.abc import Callable
from typing import Any

# Per class: a getter of its fields' values as a tuple; None when pickle's own way is used
# (not a frozen slotted dataclass).
_WRITERS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}
_NAMES: dict[type, tuple[str, ...]] = {}


def dumps(value: object) -> bytes:
    """`value` pickled, its frozen slotted dataclasses by their fields' values."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: object) -> Any:
        cls = type(obj)
        writer = _WRITERS[cls] if cls in _WRITERS else _writer(cls)
        if writer is None:
            return NotImplemented
        return _rebuilt, (cls, writer(obj))


def _writer(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    writer: Callable[[Any], tuple[Any, ...]] | None = None
    if (
        dataclasses.is_dataclass(cls)
        and "__slots__" in cls.__dict__
        and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    ):
        names = _names(cls)
        if len(names) > 1:
            writer = operator.attrgetter(*names)
        elif names:
            one = operator.attrgetter(names[0])
            writer = lambda obj: (one(obj),)  # noqa: E731
    _WRITERS[cls] = writer
    return writer


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(field.name for field in dataclasses.fields(cls))
    return names


def _rebuilt(cls: type, values: tuple[Any, ...]) -> object:
    """An instance of `cls` with these field values (as `dumps` wrote them): its slots set
    directly, as a frozen dataclass's own `__setstate__` does."""
    obj: object = object.__new__(cls)
    for name, value in zip(_NAMES.get(cls) or _names(cls), values, strict=True):
        object.__setattr__(obj, name, value)
    return obj
