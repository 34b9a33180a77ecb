"""One update's route entries replaced where they are kept (the route index and the cluster
resolution): those of the routes a change reaches, then those whose conflicts change; the
items they served and serve noted for the node groups' index."""

from __future__ import annotations

from collections.abc import Mapping

from dragoman.dag.incremental.cluster_resolution import ClusterResolution
from dragoman.dag.incremental.conflicts import conflict_changes
from dragoman.dag.incremental.entries import (
    EntryInputs,
    Recording,
    Route,
    RouteEntry,
    route_entry,
)
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.incremental.served_groups import ServedItem
from dragoman.dag.node_groups.group_index import ServedKey
from dragoman.objects import ObjectKey


class EntryReplacement:
    def __init__(
        self,
        routes: RouteIndex,
        clusters: ClusterResolution,
        inputs: EntryInputs,
        recording: Recording | None,
    ) -> None:
        self._routes, self._clusters = routes, clusters
        self._inputs = inputs
        # None: a build never patched, which keeps neither what routes read nor served items.
        self._recording = recording
        self.removed: dict[ServedKey, ServedItem] = {}
        self.added: dict[ServedKey, ServedItem] = {}

    def replace(self, routes: Mapping[ObjectKey, Route | None]) -> set[ObjectKey] | None:
        """Replace the entries of `routes` (None: deleted), noting the items they served and
        serve in `removed` and `added`; the routes whose entries were replaced (None: routes
        came or went)."""
        inputs, recording = self._inputs, self._recording
        removed, added = self.removed, self.added
        if not self._routes.entries:
            # A full build: nothing to forget or replace, nothing in the indexes yet.
            for key, route in routes.items():
                if route is not None:
                    entry = route_entry(key, route, inputs, recording)
                    self._remember(entry)
                    if recording is not None:
                        added.update(entry.served())
            return None
        replaced: set[ObjectKey] | None = set()
        for key, route in routes.items():
            old = self._routes.entries.get(key)
            if old is not None:
                self._forget(old)
                removed.update(old.served())
            if route is not None:
                entry = route_entry(key, route, inputs, recording)
                self._remember(entry)
                added.update(entry.served())
            if replaced is not None and old is not None and route is not None:
                replaced.add(key)
            elif old is not None or route is not None:
                replaced = None
        return replaced

    def reconflict(self, replaced: set[ObjectKey] | None) -> None:
        """Replace the entries whose conflicts the replaced ones change (adding them to
        `replaced`)."""
        removed, added = self.removed, self.added
        for old, entry in conflict_changes(self._routes, self._inputs):
            self._forget(old)
            for served, item in old.served():
                # Placed by this update (not yet in the indexes), or by an earlier one.
                if added.pop(served, None) is None:
                    removed[served] = item
            self._remember(entry)
            added.update(entry.served())
            if replaced is not None:
                replaced.add(entry.key)

    def _remember(self, entry: RouteEntry) -> None:
        self._routes.add(entry)
        self._clusters.add(entry)

    def _forget(self, entry: RouteEntry) -> None:
        self._routes.remove(entry)
        self._clusters.remove(entry)
