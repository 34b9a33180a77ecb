"""Which cluster each name is: every route resolves the clusters it forwards to, and the build
keeps, of the routes defining a name, the cluster of the last one in its order. Kept up to
date name by name: only the names whose routes changed are resolved again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dragoman.dag.incremental.entries import RouteEntry
from dragoman.dag.key_index import KeyIndex
from dragoman.dag.model import AggregateCluster, Cluster, EdsCluster
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName


class ClusterResolution:
    """The clusters resolved, by name, with what a change of them reaches.

    `indexed` False (a build never patched): the EDS clusters of each Service, which only a
    later change of EndpointSlices reads, are not kept."""

    def __init__(self, indexed: bool = True) -> None:
        self._indexed = indexed
        # The routes defining each cluster (each has it in its entry's rules.clusters).
        self._sources: KeyIndex[str, ObjectKey] = KeyIndex()
        self._resolved: dict[str, Cluster] = {}
        # Names whose sources changed since the last resolve().
        self._unresolved: set[str] = set()
        # Names resolved anew since the last take_changed().
        self._changed: set[str] = set()
        # Names resolved as aggregates.
        self._aggregates: set[str] = set()
        # The names of the EDS clusters resolved for each Service.
        self._eds: KeyIndex[NamespacedName, str] = KeyIndex()
        # The last of the routes defining a name many routes define (thousands of routes may
        # forward to one Service): a route coming or going among them is not a walk of all.
        self._last: dict[str, ObjectKey] = {}

    @property
    def resolved(self) -> Mapping[str, Cluster]:
        return self._resolved

    @property
    def has_aggregates(self) -> bool:
        return bool(self._aggregates)

    def eds_clusters(self, service: NamespacedName) -> Iterable[str]:
        """The names of the EDS clusters resolved for `service`."""
        return self._eds.keys(service)

    def add(self, entry: RouteEntry) -> None:
        """The clusters of a new entry: resolved again at the next resolve()."""
        key, sources, unresolved, last = entry.key, self._sources, self._unresolved, self._last
        for name in entry.rules.clusters:
            sources.add(name, key)
            unresolved.add(name)
            if (before := last.get(name)) is not None and before < key:
                last[name] = key

    def remove(self, entry: RouteEntry) -> None:
        key, sources, unresolved, last = entry.key, self._sources, self._unresolved, self._last
        for name in entry.rules.clusters:
            sources.remove(name, key)
            unresolved.add(name)
            if last.get(name) == key:
                del last[name]

    def take_changed(self) -> set[str]:
        """The names resolved anew (or gone) since the last call."""
        changed, self._changed = self._changed, set()
        return changed

    def resolve(self, entries: Mapping[ObjectKey, RouteEntry]) -> None:
        """Resolve the names whose sources changed, from the entries defining them."""
        resolved = self._resolved
        changed, aggregates = self._changed, self._aggregates
        indexed = self._indexed
        for name in self._unresolved:
            before = resolved.get(name)
            if indexed and isinstance(before, EdsCluster):
                self._eds.remove(_service_of(before), name)
            last = self._last_source(name)
            if last is None:
                if resolved.pop(name, None) is not None:
                    changed.add(name)
                aggregates.discard(name)
                continue
            cluster = entries[last].rules.clusters[name]
            if before is not cluster:
                changed.add(name)
            resolved[name] = cluster
            if indexed and isinstance(cluster, EdsCluster):
                self._eds.add(_service_of(cluster), name)
            if isinstance(cluster, AggregateCluster):
                aggregates.add(name)
            else:
                aggregates.discard(name)
        self._unresolved = set()

    def _last_source(self, name: str) -> ObjectKey | None:
        """The last of the routes defining `name` (None: none does)."""
        last = self._last.get(name)
        if last is None:
            last = self._sources.greatest(name)
            if last is not None and self._sources.count(name) >= _REMEMBER_LAST_FROM:
                self._last[name] = last
        return last


# Names defined by at least this many routes have the last of them remembered.
_REMEMBER_LAST_FROM = 8


def _service_of(cluster: EdsCluster) -> NamespacedName:
    return cluster.service.namespace, cluster.service.name
