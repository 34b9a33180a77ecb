"""One object for each value that thousands of parsed objects repeat.

The YAML loader (or the JSON decoder, or the Kubernetes client) makes a new object of every
occurrence of a value: at 10,000 Services, "default" is ten thousand strings, port 8080 ten
thousand ints, `parentRefs: [{name: gateway}]` ten thousand equal tuples. Parsers hand what
they keep through these functions, so equal values are one object. Only immutable values
are shared (strings, ints, tuples of frozen dataclasses): no holder can change what the
others see.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

# Strings: interned as xDS serving interns the names streams subscribe to (one facility).
from dragoman.snapshots.interning import INTERN_MAX_LENGTH, INTERNED_STRINGS_ARE_FREED, interned

__all__ = [
    "CANONICAL_LIMIT",
    "INTERNED_STRINGS_ARE_FREED",
    "INTERN_MAX_LENGTH",
    "SHARED_INT_MAX",
    "canonical",
    "interned",
    "shared_int",
]

# Ints shared: ports, weights, status codes, timeouts in seconds. Bounded by the range, so
# the table cannot grow past it whatever the input.
SHARED_INT_MAX = 65535
# Distinct values `canonical` keeps; past it, the table starts over (a hostile or unusual
# input must not grow it without bound, nor stop the sharing for good).
CANONICAL_LIMIT = 2048

_ints: dict[int, int] = {}
_canonical: dict[Hashable, Hashable] = {}

Value = TypeVar("Value", bound=Hashable)


def shared_int(value: int) -> int:
    """The one int object equal to value, for small non-negative ints (Python itself shares
    only -5 to 256)."""
    if 0 <= value <= SHARED_INT_MAX:
        return _ints.setdefault(value, value)
    return value


def canonical(value: Value) -> Value:
    """The first value equal to `value` seen (it must be immutable: a tuple of frozen
    dataclasses of strings and ints), or value itself."""
    found = _canonical.get(value)
    if found is not None:
        return found  # type: ignore[return-value]
    if len(_canonical) >= CANONICAL_LIMIT:
        # Full (of values whose objects may be long gone, or of a hostile input's): start
        # over, so that what comes now is shared again, within the bound.
        _canonical.clear()
    _canonical[value] = value
    return value
