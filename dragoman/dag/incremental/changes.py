"""Which objects differ between two stores, kind by kind."""

from __future__ import annotations

from collections.abc import Mapping

from dragoman.store import OBJECT_FIELDS, NamespacedName, Store

# Store field name -> keys added, removed or changed.
StoreChanges = dict[str, frozenset[NamespacedName]]


def store_changes(before: Store, after: Store) -> StoreChanges:
    """The keys that differ, per Store field with any. Objects a source kept are the same
    Python objects, so most comparisons stop at identity; equal values count as unchanged.
    A store made from `before` by with_object says which keys it changed: only those are
    compared."""
    hinted = after.keys_changed_since(before)
    changes: StoreChanges = {}
    if hinted is not None:
        for name, keys in hinted.items():
            old, new = getattr(before, name), getattr(after, name)
            changed = frozenset(k for k in keys if not _same(old.get(k), new.get(k)))
            if changed:
                changes[name] = changed
        return changes
    for name in OBJECT_FIELDS:
        old, new = getattr(before, name), getattr(after, name)
        if old is new:
            continue
        changed = changed_keys(old, new)
        if changed:
            changes[name] = changed
    return changes


def _same(old: object, new: object) -> bool:
    return old is new or old == new


def changed_keys(
    old: Mapping[NamespacedName, object], new: Mapping[NamespacedName, object]
) -> frozenset[NamespacedName]:
    changed = set(old.keys() - new.keys())
    for key, value in new.items():
        was = old.get(key)
        if was is not value and was != value:
            changed.add(key)
    return frozenset(changed)
