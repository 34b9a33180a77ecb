"""What one route's rules read of the store, recorded while they are resolved, so a change
to a Service or a ReferenceGrant finds the routes it affects."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dragoman.dag.reference_grants import ReferenceGrants, Referrer, Target
from dragoman.objects import Service
from dragoman.store import NamespacedName


class RecordingServices(Mapping[NamespacedName, Service]):
    """The store's Services, remembering every key looked up. Iterating or sizing them
    records a dependency on all of them (`every`)."""

    __slots__ = ("_services", "every", "keys_read")

    def __init__(self, services: Mapping[NamespacedName, Service]) -> None:
        self._services = services
        self.keys_read: set[NamespacedName] = set()
        self.every = False

    def restart(self) -> None:
        """Record afresh (for the next route)."""
        self.keys_read = set()
        self.every = False

    def __getitem__(self, key: NamespacedName) -> Service:
        self.keys_read.add(key)
        return self._services[key]

    def __contains__(self, key: object) -> bool:
        self.keys_read.add(key)  # type: ignore[arg-type]  # a key asked about, found or not
        return key in self._services

    # (One signature for Mapping.get's overloads: callers pass a key and perhaps a default.)
    def get(self, key: NamespacedName, default: object = None) -> object:  # type: ignore[override]
        self.keys_read.add(key)
        return self._services.get(key, default)

    def __iter__(self) -> Iterator[NamespacedName]:
        self.every = True
        return iter(self._services)

    def __len__(self) -> int:
        self.every = True
        return len(self._services)


class RecordingGrants(ReferenceGrants):
    """ReferenceGrants that remember every cross-namespace question they were asked: only a
    grant that permits one of them (before or after a change) can change an answer."""

    def __init__(self, grants: ReferenceGrants) -> None:
        # The index is shared, not rebuilt: it is never modified after construction.
        self._allowed = grants._allowed
        self.asked: set[tuple[Referrer, Target]] = set()

    def restart(self) -> None:
        """Record afresh (for the next route)."""
        self.asked = set()

    def permits(self, referrer: Referrer, target: Target) -> bool:
        if referrer.namespace != target.namespace:
            self.asked.add((referrer, target))
        return super().permits(referrer, target)
