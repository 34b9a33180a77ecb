"""Indexes from a place (a Service, an external name, a domain) to the keys found there,
where most places hold one key: that key alone, else a set of two or more. Ten thousand
one-key sets would cost about 2 MiB per index. Keys are never sets themselves."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

Place = TypeVar("Place", bound=Hashable)
Key = TypeVar("Key", bound=Hashable)

# What an index holds at one place.
Held = Key | set[Key]


def add_key(index: dict[Place, Held[Key]], at: Place, key: Key) -> bool:
    """Put `key` at `at`; True when the place held nothing before."""
    held = index.get(at)
    if held is None:
        index[at] = key
        return True
    if type(held) is set:
        held.add(key)
    elif held != key:
        index[at] = {held, key}  # type: ignore[arg-type]
    return False


def remove_key(index: dict[Place, Held[Key]], at: Place, key: Key) -> bool:
    """Take `key` out of `at`; True when the place holds nothing any more."""
    held = index.get(at)
    if held is None:
        return False
    if type(held) is set:
        held.discard(key)
        if len(held) == 1:
            index[at] = next(iter(held))
        return False
    if held == key:
        del index[at]
        return True
    return False


def keys_at(index: dict[Place, Held[Key]], at: Place) -> Iterable[Key]:
    """The keys held at `at` (none, one, or the set)."""
    held = index.get(at)
    if held is None:
        return ()
    return held if type(held) is set else (held,)  # type: ignore[return-value]
