"""DAG → the snapshot each node group's proxyless gRPC clients are served.

The build made the Service targets (`Dag.service_targets`); their translation is made when a
gRPC client of the group first asks (a deployment without gRPC clients pays nothing), then
memoized. Resources are shared: with the Envoy snapshots where the bytes are the same (EDS
clusters, CLAs), between groups, and with the previous translation, so a change
re-serializes only what it changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping

from dragoman.dag.model import (
    ALL_GATEWAYS,
    ApiListener,
    Backend,
    Cluster,
    Dag,
    EdsCluster,
    Forward,
    LoadAssignment,
    NodeGroup,
    Route,
    ServiceTargets,
)
from dragoman.envoy.grpc.grpc_messages import (
    FAILING_CLUSTER,
    api_listener,
    grpc_cluster_at,
    grpc_clusters,
    grpc_eds_names,
    grpc_route_configuration,
    grpc_servable,
    routes_to_failing_cluster,
)
from dragoman.envoy.grpc.grpc_targets import group_targets, service_listener
from dragoman.envoy.resources.endpoint_messages import cluster_load_assignment
from dragoman.envoy.translate_options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.translation.translated import Translated
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    NO_REFERENCES,
    ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)

EMPTY_GROUP = NodeGroup(name=ALL_GATEWAYS, listeners=(), route_tables=(), clusters=())


class GrpcSnapshots:
    """The gRPC clients' snapshot of every node group of one DAG, each made on first use.

    `envoy`: the Envoy snapshots of the same DAG, whose resources are shared where the bytes
    are the same. `reuse`: the translation this one replaces, whose resources are taken where
    their inputs are unchanged. Use it from one thread.
    """

    def __init__(
        self,
        dag: Dag,
        envoy: Mapping[str, Snapshot],
        options: TranslateOptions = DEFAULT_OPTIONS,
        reuse: GrpcSnapshots | None = None,
    ) -> None:
        self._dag = dag
        self._envoy = envoy
        self._options = options
        self._snapshots: dict[str, Snapshot] = {}
        self._made: dict[Hashable, tuple[Resource, ...]] = {}
        # Only one translation back: older ones are dropped, never chained.
        self._earlier = reuse._reusable() if reuse is not None else {}
        self._shared: dict[str, dict[str, Resource]] | None = None
        self._service_listeners: tuple[ApiListener, ...] | None = None

    def snapshot(self, group: str) -> Snapshot:
        found = self._snapshots.get(group)
        if found is None:
            found = self._snapshots[group] = self._translate(group)
        return found

    def _reusable(self) -> dict[Hashable, tuple[Resource, ...]]:
        return self._made or self._earlier

    def _translate(self, group: str) -> Snapshot:
        # A group naming a Gateway that does not exist gets nothing (cache.group_for).
        node_group = self._dag.groups.get(group)
        targets = self._dag.service_targets
        if self._service_listeners is None:
            # Made once for every group.
            self._service_listeners = tuple(service_listener(t) for t in targets.targets)
        listeners = [
            self._servable(listener, targets)
            for listener in group_targets(node_group or EMPTY_GROUP, self._service_listeners)
        ]
        clusters = self._clusters(listeners, targets)
        cluster_resources: list[Resource] = []
        for value in clusters:
            cluster_resources.extend(self._cluster_resources(value))
        return Snapshot(
            types={
                CLUSTER: TypeSnapshot.of(_unique(cluster_resources)),
                ENDPOINT: TypeSnapshot.of(
                    self._assignment(name, targets) for name in _eds_names(clusters)
                ),
                LISTENER: TypeSnapshot.of(self._listener(listener) for listener in listeners),
                ROUTE: TypeSnapshot.of(self._route_table(listener) for listener in listeners),
            }
        )

    # What the listeners reach.

    def _cluster_value(self, name: str, targets: ServiceTargets) -> Cluster | None:
        return self._dag.clusters.get(name) or targets.clusters.get(name)

    def _servable(self, listener: ApiListener, targets: ServiceTargets) -> ApiListener:
        """The listener with backends gRPC clients cannot be sent to made invalid."""

        def usable(name: str | None) -> bool:
            value = self._cluster_value(name, targets) if name is not None else None
            return value is not None and grpc_servable(value)

        def backend(value: Backend) -> Backend:
            return value if usable(value.cluster) else dataclasses.replace(value, cluster=None)

        def route(value: Route) -> Route:
            action = value.action
            if not isinstance(action, Forward) or all(usable(b.cluster) for b in action.backends):
                return value
            backends = tuple(backend(b) for b in action.backends)
            return dataclasses.replace(value, action=dataclasses.replace(action, backends=backends))

        routes = tuple(route(value) for value in listener.routes)
        if routes == listener.routes:
            return listener
        return dataclasses.replace(listener, routes=routes)

    def _clusters(self, listeners: Iterable[ApiListener], targets: ServiceTargets) -> list[Cluster]:
        names = sorted(
            {
                backend.cluster
                for listener in listeners
                for route in listener.routes
                if isinstance(route.action, Forward)
                for backend in route.action.backends
                if backend.cluster is not None
            }
        )
        values = (self._cluster_value(name, targets) for name in names)
        clusters = [value for value in values if value is not None]
        routes = (route for listener in listeners for route in listener.routes)
        if any(map(routes_to_failing_cluster, routes)):
            clusters.append(FAILING_CLUSTER)
        return clusters

    # Resources, memoized.

    def _memo(
        self, key: Hashable, make: Callable[[], tuple[Resource, ...]]
    ) -> tuple[Resource, ...]:
        found = self._made.get(key)
        if found is None:
            found = self._earlier.get(key)
            if found is None:
                found = make()
            self._made[key] = found
        return found

    def _listener(self, value: ApiListener) -> Resource:
        (resource,) = self._memo(
            (LISTENER, value.name),
            # Its RouteConfiguration is named like it.
            lambda: (
                Translated.made(value.name, value, api_listener, self._options, (value.name,)),
            ),
        )
        return resource

    def _route_table(self, value: ApiListener) -> Resource:
        (resource,) = self._memo(
            (ROUTE, value),
            lambda: (Resource.of(value.name, grpc_route_configuration(value)),),
        )
        return resource

    def _cluster_resources(self, value: Cluster) -> tuple[Resource, ...]:
        shared = self._envoy_resource(CLUSTER, value.name)
        if (
            isinstance(value, EdsCluster)
            and shared is not None
            and self._dag.clusters.get(value.name) == value
        ):
            return (shared,)  # the same message Envoy gets
        return self._memo(
            (CLUSTER, value),
            lambda: _cluster_resources(value, self._options),
        )

    def _assignment(self, name: str, targets: ServiceTargets) -> Resource:
        known = (
            self._dag.load_assignments if name in self._dag.clusters else targets.load_assignments
        )
        value = known.get(name) or LoadAssignment(cluster=name)
        shared = self._envoy_resource(ENDPOINT, name)
        if isinstance(shared, Translated) and shared.source == value:
            return shared
        (resource,) = self._memo(
            (ENDPOINT, value), lambda: (Resource.of(name, cluster_load_assignment(value)),)
        )
        return resource

    def _envoy_resource(self, type_url: str, name: str) -> Resource | None:
        if self._shared is None:
            self._shared = {CLUSTER: {}, ENDPOINT: {}}
            for snapshot in self._envoy.values():
                for kind, by_name in self._shared.items():
                    for resource_name, resource in snapshot.of_type(kind).resources.items():
                        by_name.setdefault(resource_name, resource)
        return self._shared[type_url].get(name)


def _eds_names(clusters: Iterable[Cluster]) -> list[str]:
    names: set[str] = set()
    for value in clusters:
        names.update(grpc_eds_names(value))
    return sorted(names)


def _cluster_resources(value: Cluster, options: TranslateOptions) -> tuple[Resource, ...]:
    """The resources of grpc_clusters(value), each naming its CLA if it reads one."""
    eds = grpc_eds_names(value)
    return tuple(
        Translated.of_message(
            message.name,
            message,
            (value, index),
            grpc_cluster_at,
            options,
            (message.name,) if message.name in eds else NO_REFERENCES,
        )
        for index, message in enumerate(grpc_clusters(value, options))
    )


def _unique(resources: Iterable[Resource]) -> list[Resource]:
    """One resource per name (an aggregate's EDS child may also be reached directly)."""
    by_name: dict[str, Resource] = {}
    for resource in resources:
        by_name.setdefault(resource.name, resource)
    return list(by_name.values())
