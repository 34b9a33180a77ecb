"""A least-recently-used map bounded by the bytes its values hold, not by how many there are.

The xDS caches keep derived bytes (encoded response bodies, rewritten resources) whose sizes
range from a few hundred bytes to megabytes: a bound on the entry count alone lets a few
hundred large values pin hundreds of MiB after they stopped being useful.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLru(Generic[K, V]):
    """Entries are dropped, least recently used first, while their sizes sum over `max_bytes`.

    The newest entry always stays, even alone over the bound: it is the one about to be
    shared by every stream. `size` says how many bytes a value holds.
    """

    def __init__(self, max_bytes: int, size: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found[0]

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        size = self._size(value)
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes and len(self._entries) > 1:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped

    def pop(self, key: K) -> V | None:
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self.bytes -= found[1]
        return found[0]

    def drop_where(self, condition: Callable[[K], bool]) -> int:
        """Remove every entry whose key meets `condition`; return how many went."""
        doomed = [key for key in self._entries if condition(key)]
        for key in doomed:
            self.pop(key)
        return len(doomed)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0
