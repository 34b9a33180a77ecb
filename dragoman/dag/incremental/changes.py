"""Which objects differ between two stores, kind by kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from dragoman.store import NamespacedName, Store

# Store field name -> keys added, removed or changed.
StoreChanges = dict[str, frozenset[NamespacedName]]


def store_changes(before: Store, after: Store) -> StoreChanges:
    """The keys that differ, per Store field with any. Objects a source kept are the same
    Python objects, so most comparisons stop at identity; equal values count as unchanged."""
    changes: StoreChanges = {}
    for field in fields(Store):
        old, new = getattr(before, field.name), getattr(after, field.name)
        if old is new:
            continue
        changed = changed_keys(old, new)
        if changed:
            changes[field.name] = changed
    return changes


def changed_keys(
    old: Mapping[NamespacedName, object], new: Mapping[NamespacedName, object]
) -> frozenset[NamespacedName]:
    changed = set(old.keys() - new.keys())
    for key, value in new.items():
        was = old.get(key)
        if was is not value and was != value:
            changed.add(key)
    return frozenset(changed)
