"""A map a stream holds that may be someone else's until the stream first changes it.

A thousand idle streams hold what the snapshot holds: SotW streams the snapshot's own
name -> resource mapping, delta streams the shared name -> digest map of it. Each stream
keeps a reference to that shared map, and copies it into a dict of its own only when it must
change one entry (a NACK, a removal, a resource sent by name).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from types import MappingProxyType
from typing import Generic, TypeVar, overload

V = TypeVar("V")
D = TypeVar("D")

_EMPTY: Mapping[str, object] = MappingProxyType({})


class CopyOnWrite(Mapping[str, V], Generic[V]):
    """Reads go to the map held; `writable` gives a dict of the holder's own to change."""

    __slots__ = ("_map", "_owned")

    def __init__(self, mapping: Mapping[str, V] | None = None) -> None:
        self._map: Mapping[str, V] = mapping if mapping is not None else _EMPTY  # type: ignore[assignment]  # the empty map holds no value of any type
        self._owned = False

    @property
    def mapping(self) -> Mapping[str, V]:
        """The map held: shared (never change it) or the holder's own."""
        return self._map

    @property
    def is_shared(self) -> bool:
        return not self._owned

    def share(self, mapping: Mapping[str, V]) -> None:
        """Hold `mapping`, which others may hold too: it is copied before any change."""
        self._map, self._owned = mapping, False

    def own(self, mapping: dict[str, V]) -> None:
        """Hold `mapping`, a dict no one else holds."""
        self._map, self._owned = mapping, True

    def writable(self) -> dict[str, V]:
        """The holder's own dict, made now as a copy of the shared map if it has none."""
        if not self._owned:
            self._map, self._owned = dict(self._map), True
        owned = self._map
        assert isinstance(owned, dict)
        return owned

    def share_if_equal(
        self, mapping: Mapping[str, V], same: Callable[[V, V], bool] = operator.eq
    ) -> None:
        """Hold the shared `mapping` in place of an equal map (`same` compares two values):
        an idle stream's usual state, with no copy of its own."""
        held = self._map
        if held is mapping or len(held) != len(mapping):
            return
        if same is operator.eq:
            equal = held == mapping
        else:
            equal = True
            for name, value in mapping.items():
                mine = held.get(name)
                if mine is None or not same(mine, value):
                    equal = False
                    break
        if equal:
            self.share(mapping)

    # Reads, straight to the map held (these are on the hot paths of every push).

    def __getitem__(self, name: str) -> V:
        return self._map[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, name: object) -> bool:
        return name in self._map

    @overload
    def get(self, name: str, /) -> V | None: ...
    @overload
    def get(self, name: str, default: V | D, /) -> V | D: ...
    def get(self, name: str, default: object = None, /) -> object:
        return self._map.get(name, default)

    def keys(self) -> KeysView[str]:
        return self._map.keys()

    def items(self) -> ItemsView[str, V]:
        return self._map.items()

    def values(self) -> ValuesView[V]:
        return self._map.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CopyOnWrite):
            other = other._map
        return self._map == other

    __hash__ = None  # type: ignore[assignment]  # a mutable holder, like dict

    def __repr__(self) -> str:
        return f"CopyOnWrite({dict(self._map)!r}, {'owned' if self._owned else 'shared'})"
