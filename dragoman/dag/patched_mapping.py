"""A dict made from another by putting or removing a few keys, which says which keys.

An EndpointSlice change makes the Dag's load assignments anew from the previous ones with one
entry replaced; whoever holds the previous mapping (translation) learns what differs from the
keys recorded here, not by comparing every value of ten thousand."""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class PatchedDict(dict[K, V]):
    """A copy of `base` that records every key put or removed since it was made."""

    __slots__ = ("__weakref__", "_base", "_touched")

    def __init__(self, base: Mapping[K, V]) -> None:
        super().__init__(base)
        # Weak: a chain of patches must not keep every earlier mapping alive.
        self._base: weakref.ref[Mapping[K, V]] | None = _weak(base)
        self._touched: set[K] = set()

    def changed_since(self, earlier: Mapping[K, V]) -> Collection[K] | None:
        """The keys whose values may differ from `earlier`'s (a superset: a key put back to
        an equal value is counted), or None when this was not made from `earlier`."""
        base = self._base() if self._base is not None else None
        return self._touched if base is earlier else None

    def __setitem__(self, key: K, value: V) -> None:
        self._touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: K) -> None:
        self._touched.add(key)
        super().__delitem__(key)

    def pop(self, key: K, *default: Any) -> Any:
        self._touched.add(key)
        return super().pop(key, *default)

    def update(self, *others: Any, **named: V) -> None:
        made: dict[K, V] = dict(*others, **named)
        self._touched.update(made)
        super().update(made)

    def setdefault(self, key: K, default: Any = None) -> Any:
        self._touched.add(key)
        return super().setdefault(key, default)

    def popitem(self) -> tuple[K, V]:
        item = super().popitem()
        self._touched.add(item[0])
        return item

    def clear(self) -> None:
        self._touched.update(self)
        super().clear()

    # (mypy holds it to dict.__or__'s overloads, which make a new dict; this one updates
    # itself in place and returns itself, as dict's |= does.)
    def __ior__(self, other: Any) -> PatchedDict[K, V]:  # type: ignore[override,misc]
        self.update(other)
        return self


def changed_keys_since(mapping: Mapping[K, V], earlier: Mapping[K, V]) -> Collection[K] | None:
    """The keys of `mapping` (or `earlier`) whose values may differ, when `mapping` says so
    (a PatchedDict made from `earlier`); None when only comparing them would tell."""
    if isinstance(mapping, PatchedDict):
        return mapping.changed_since(earlier)
    return None


def _weak(base: Mapping[K, V]) -> weakref.ref[Mapping[K, V]] | None:
    try:
        return weakref.ref(base)
    except TypeError:  # a plain dict (a full build's) has no weak references: compared then
        return None
