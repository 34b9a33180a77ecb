"""One string object for each name that many holders repeat, where the interpreter allows it.

Parsers intern what they read (`dragoman.sources.shared`) and xDS streams the names their
clients subscribe to: at 10,000 Services, or a thousand streams naming the same resources,
equal names are one object instead of one each.
"""

from __future__ import annotations

import sys

# Strings longer than this (certificates, long header values) are rarely repeated: kept as
# read.
INTERN_MAX_LENGTH = 253

# sys.intern lets a string go once nothing holds it, except on CPython 3.12.0-3.12.5 and on
# free-threaded builds, where every interned string stays for good: there names that come
# and go (EndpointSlices, rolled Services) would grow memory without bound, so strings are
# kept as read.
INTERNED_STRINGS_ARE_FREED = not (
    (3, 12, 0) <= sys.version_info[:3] < (3, 12, 6)
    or not getattr(sys, "_is_gil_enabled", lambda: True)()
)

_intern = sys.intern


def interned(value: str) -> str:
    """The one string object equal to value (`sys.intern`), when short enough to be shared
    and the interpreter frees interned strings no longer used."""
    if INTERNED_STRINGS_ARE_FREED and len(value) <= INTERN_MAX_LENGTH:
        return _intern(value)
    return value
