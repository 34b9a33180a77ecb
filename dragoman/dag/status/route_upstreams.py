"""The upstream side of a build, beside routes: the inputs clusters are shaped by, the
children of in-cluster-first aggregates, BackendTLSPolicy statuses."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import AggregateCluster, Cluster, NodeGroup, ObjectStatus
from dragoman.dag.status.policies import PolicyAncestor, gateway_ancestor_ref, policy_status
from dragoman.dag.status.routes import RouteOutcome
from dragoman.dag.upstreams.reachable_backends import RouteBackendNames
from dragoman.objects import ObjectKey, Service
from dragoman.store import NamespacedName

# The Gateway API keeps at most this many ancestors in a policy's status.
MAX_ANCESTORS = 16


@dataclass(frozen=True, slots=True)
class RouteUpstreams:
    """A route, what became of its parents, and the backends it names."""

    outcome: RouteOutcome
    names: RouteBackendNames


def with_aggregate_children(
    groups: Mapping[str, NodeGroup], clusters: Mapping[str, Cluster]
) -> tuple[dict[str, NodeGroup], dict[str, Cluster]]:
    """Every group also serves the clusters its aggregates name, and the DAG defines them."""
    every = dict(clusters)
    for cluster in clusters.values():
        if isinstance(cluster, AggregateCluster):
            every.update((child.name, child) for child in cluster.children)
    served = {}
    for name, group in groups.items():
        children = {
            child.name
            for cluster_name in group.clusters
            if isinstance(named := clusters.get(cluster_name), AggregateCluster)
            for child in named.children
        }
        if children:
            group = dataclasses.replace(group, clusters=tuple(sorted({*group.clusters, *children})))
        served[name] = group
    return served, every


def policy_statuses(routes: Sequence[RouteUpstreams], context: BuildContext) -> list[ObjectStatus]:
    """A status for every BackendTLSPolicy: one ancestor per Gateway that accepted a route
    reaching a Service the policy targets."""
    store, policies = context.store, context.upstream.tls_policies
    ancestors: dict[ObjectKey, set[ObjectKey]] = {}
    for item in routes:
        gateways = {a.gateway for parent in item.outcome.parents for a in parent.attachments}
        if not gateways:
            continue
        for namespace, name in item.names.services:
            for policy in policies.targeting(namespace, name):
                ancestors.setdefault(policy, set()).update(gateways)
    ports = _PortNames(store.services)
    statuses = []
    for policy in sorted(p.key for p in store.backend_tls_policies.values()):
        conditions = policies.conditions(policy, ports)
        entries = [
            PolicyAncestor(gateway_ancestor_ref(gateway), conditions)
            for gateway in sorted(ancestors.get(policy, ()))[:MAX_ANCESTORS]
        ]
        statuses.append(policy_status(policy, entries, context.options.controller_name))
    return statuses


class _PortNames(Mapping[NamespacedName, frozenset[str]]):
    """Each Service's port names, made for the few Services a policy targets when asked,
    not for every Service of the store on every build."""

    def __init__(self, services: Mapping[NamespacedName, Service]) -> None:
        self._services = services

    def __getitem__(self, key: NamespacedName) -> frozenset[str]:
        return frozenset(port.name for port in self._services[key].ports)

    def __contains__(self, key: object) -> bool:
        return key in self._services

    def __iter__(self) -> Iterator[NamespacedName]:
        return iter(self._services)

    def __len__(self) -> int:
        return len(self._services)
