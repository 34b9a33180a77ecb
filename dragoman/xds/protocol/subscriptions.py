"""What SotW and delta subscriptions share: the wildcard name, and names held as shared
objects."""

from __future__ import annotations

from collections.abc import Iterable

from dragoman.snapshots.interning import interned
from dragoman.snapshots.resources import TypeSnapshot

# Subscribes to every resource of a type (and, in a delta request's unsubscribe list, ends it).
WILDCARD = "*"


def subscription_names(names: Iterable[str], current: TypeSnapshot) -> frozenset[str]:
    """Names a request subscribes to, as shared objects: the snapshot's own name set when
    they are all its names (the usual EDS subscription), else each name interned, so that
    a thousand streams naming the same resources do not each keep their own strings."""
    requested = frozenset(names)
    every = current.names
    if requested == every:
        return every
    return frozenset(interned(name) for name in requested)
