"""Name -> digest maps of type snapshots, shared read-only by every delta stream holding one,
and the diffs between them computed once for all those streams."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from dragoman.snapshots.resources import Resource, TypeSnapshot


class DigestMap(dict[str, str]):
    """The name -> digest map of one type snapshot, shared by every delta stream holding it.

    Never changed once made: a stream copies it (`CopyOnWrite`) before changing its own. A
    dict for the speed of its lookups; weakly referenceable, so that the maps no stream
    holds any more are let go (10,000 names cost about 200 KiB per map)."""

    __slots__ = ("__weakref__", "version")

    def __init__(self, version: str, digests: Mapping[str, str]) -> None:
        super().__init__(digests)
        self.version = version

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a shared digest map is read-only; copy it with writable()")

    __setitem__ = __delitem__ = _read_only
    pop = popitem = clear = update = setdefault = __ior__ = _read_only


# Digest maps kept although no stream holds them (the latest few, which streams are about to
# take), and diffs between them.
RECENT_MAPS = 4
DIFFS = 64


class DigestMaps:
    """Read-only name -> digest maps of type snapshots, and the diffs between them, shared by
    the delta streams of one SnapshotCache (which owns this).

    A map lives as long as a stream holds it (plus the latest few): a burst of changes
    leaves no map behind per version once every stream has moved on."""

    def __init__(self, recent: int = RECENT_MAPS, diffs: int = DIFFS) -> None:
        self._max_recent, self._max_diffs = recent, diffs
        self._recent: OrderedDict[str, DigestMap] = OrderedDict()
        self._alive: dict[str, weakref.ref[DigestMap]] = {}
        self._diffs: OrderedDict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        """How many maps are alive (held by a stream, or recent)."""
        return len(self._alive)

    def digests_of(self, current: TypeSnapshot) -> Mapping[str, str]:
        """name -> digest of a type snapshot, read-only and shared by every stream.

        Keyed by the type version alone: that version is a hash of these very pairs.
        """
        version = current.version
        found = self._find(version)
        if found is None:
            found = self._derived_map(current) or DigestMap(
                version, {n: r.digest for n, r in current.resources.items()}
            )
            self._alive[version] = weakref.ref(found, self._forget(version))
        self._recent[version] = found
        self._recent.move_to_end(version)
        if len(self._recent) > self._max_recent:
            self._recent.popitem(last=False)
        return found

    def shared_diff(
        self, old_version: str, current: TypeSnapshot
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(changed or added names, removed names) from the digest map of `old_version` to
        `current`'s, computed once for every stream holding exactly the old map.

        Raises KeyError if the old map is no longer kept.
        """
        key = (old_version, current.version)
        found = self._diffs.get(key)
        if found is None:
            old = self._find(old_version)
            if old is None:
                raise KeyError(old_version)
            new = current.resources
            derived = current.derived
            if derived is not None and derived[0] == old_version:
                # Made from a snapshot of the old map's content: only the names it says
                # differ may (the few of a scope or CLA change, not a step per resource).
                names = sorted(derived[1])
                changed = tuple(n for n in names if n in new and old.get(n) != new[n].digest)
                removed = tuple(n for n in names if n not in new and n in old)
            else:
                changed = tuple(n for n, r in new.items() if old.get(n) != r.digest)
                removed = tuple(sorted(n for n in old if n not in new))
            found = self._diffs[key] = (changed, removed)
            if len(self._diffs) > self._max_diffs:
                self._diffs.popitem(last=False)
        return found

    def recent_equal(self, mapping: Mapping[str, str]) -> DigestMap | None:
        """The shared map of a recent version equal to `mapping`, newest first: what a
        reconnecting client names it holds is most often exactly one of them."""
        for recent in reversed(self._recent.values()):
            if len(recent) == len(mapping) and recent == mapping:
                return recent
        return None

    def shared_map_version(self, mapping: Mapping[str, str]) -> str | None:
        """The type version whose shared digest map `mapping` is, if it is one of these."""
        if not isinstance(mapping, DigestMap):
            return None
        version = mapping.version
        return version if self._find(version) is mapping else None

    def brings_to_current(
        self,
        held: Mapping[str, str],
        updates: Sequence[Resource],
        removed: Sequence[str],
        current: TypeSnapshot,
    ) -> bool:
        """Whether `held` with `updates` and `removed` applied is exactly `current`'s digest
        map: a stream's first answer of the whole snapshot, or the shared diff from the
        shared map of an earlier version (updates are always `current`'s resources)."""
        if not held:
            return not removed and len(updates) == len(current.resources)
        return self.is_shared_diff(held, updates, removed, current)

    def is_shared_diff(
        self,
        old: Mapping[str, str],
        updates: Sequence[Resource],
        removed: Sequence[str],
        current: TypeSnapshot,
    ) -> bool:
        """Whether `updates` and `removed` are exactly the diff from `old`, a shared digest
        map, to `current`."""
        old_version = self.shared_map_version(old)
        if old_version is None:
            return False
        try:
            changed, gone = self.shared_diff(old_version, current)
        except KeyError:
            return False
        return (
            len(changed) == len(updates)
            and tuple(removed) == gone
            and all(name == r.name for name, r in zip(changed, updates, strict=True))
            and all(current.resources.get(r.name) is r for r in updates)
        )

    def _derived_map(self, current: TypeSnapshot) -> DigestMap | None:
        """`current`'s map made from the kept map of the snapshot it was derived from (a
        copy, then the names that differ put in place), if that one is kept."""
        derived = current.derived
        base = self._find(derived[0]) if derived is not None else None
        if derived is None or base is None:
            return None
        made = DigestMap(current.version, base)
        resources = current.resources
        for name in derived[1]:
            resource = resources.get(name)
            if resource is not None:
                dict.__setitem__(made, name, resource.digest)  # before anyone holds it
            elif name in made:
                dict.__delitem__(made, name)
        return made

    def _find(self, version: str) -> DigestMap | None:
        ref = self._alive.get(version)
        return ref() if ref is not None else None

    def _forget(self, version: str) -> Callable[[weakref.ref[DigestMap]], None]:
        def forget(gone: weakref.ref[DigestMap]) -> None:
            if self._alive.get(version) is gone:  # not replaced by a newer map meanwhile
                del self._alive[version]

        return forget
