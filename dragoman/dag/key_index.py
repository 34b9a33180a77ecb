"""An index from a place (a Service, an external name, a domain, a listener) to the keys found
there. Most places hold one key: it is kept alone, a set only once two or more are there (ten
thousand one-key sets would cost about 2 MiB per index). How a place holds its keys is the
index's own business: callers only add, remove and ask."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

Place = TypeVar("Place", bound=Hashable)
Key = TypeVar("Key", bound=Hashable)


class KeyIndex(Generic[Place, Key]):
    """Keys by place. Keys are never sets themselves."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        # A place's one key, or the set of its keys (two or more).
        self._held: dict[Place, Key | set[Key]] = {}

    @classmethod
    def of(cls, keys_by_place: Mapping[Place, Sequence[Key]]) -> KeyIndex[Place, Key]:
        """An index holding these keys at each place (a place with none is left out)."""
        index: KeyIndex[Place, Key] = cls()
        index._held = {
            at: keys[0] if len(keys) == 1 else set(keys)
            for at, keys in keys_by_place.items()
            if keys
        }
        return index

    def add(self, at: Place, key: Key) -> bool:
        """Put `key` at `at`; True when the place held nothing before."""
        held = self._held.get(at)
        if held is None:
            self._held[at] = key
            return True
        if type(held) is set:
            held.add(key)
        elif held != key:
            self._held[at] = {held, key}  # type: ignore[arg-type]  # held is a Key here
        return False

    def remove(self, at: Place, key: Key) -> bool:
        """Take `key` out of `at`; True when the place holds nothing any more."""
        held = self._held.get(at)
        if held is None:
            return False
        if type(held) is set:
            held.discard(key)
            if len(held) == 1:
                self._held[at] = next(iter(held))
            return False
        if held == key:
            del self._held[at]
            return True
        return False

    def keys(self, at: Place) -> Iterable[Key]:
        """The keys held at `at` (none, one, or more), to be read before the index changes."""
        held = self._held.get(at)
        if held is None:
            return ()
        return held if type(held) is set else (held,)  # type: ignore[return-value]  # a Key

    def count(self, at: Place) -> int:
        """How many keys `at` holds."""
        held = self._held.get(at)
        if held is None:
            return 0
        return len(held) if type(held) is set else 1

    def greatest(self, at: Place) -> Key | None:
        """The greatest key held at `at` (keys must be ordered), None when it holds none."""
        held = self._held.get(at)
        if type(held) is set:
            return max(held)  # type: ignore[type-var]  # ordered keys, as documented
        return held  # type: ignore[return-value]  # a Key or None

    def shared(self) -> Iterator[tuple[Place, Iterable[Key]]]:
        """Every place holding two or more keys, with its keys."""
        for at, held in self._held.items():
            if type(held) is set:
                yield at, held

    def __contains__(self, at: object) -> bool:
        return at in self._held

    def __len__(self) -> int:
        """How many places hold keys."""
        return len(self._held)
