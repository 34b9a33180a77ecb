"""What proxyless gRPC clients can dial, as plain values: every Service port by its cluster
DNS name, and every exact route hostname on each Gateway port it is served on.

A gRPC client dialing `xds:///<host>:<port>` asks for the Listener named `<host>:<port>`.
Service targets (`<svc>.<ns>.svc.<cluster domain>:<port>`) send every call to that Service
port's cluster, resolved as a route's backendRef would be (ExternalName aliases, policy and
the DNS check included). Route targets (`<hostname>:<port>`) carry the routes of the virtual
host a Gateway port serves for that hostname, precedence and listener isolation included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field

from dragoman.dag.context import build_context
from dragoman.dag.dns_check import DnsObservations, served_addresses
from dragoman.dag.external_name_policy import ExternalNamePolicy
from dragoman.dag.external_names import normalise
from dragoman.dag.frontends.hostnames import ANY_HOST
from dragoman.dag.model import (
    AggregateCluster,
    Backend,
    Cluster,
    Dag,
    DnsCluster,
    Forward,
    HttpListener,
    HttpsListener,
    Listener,
    LoadAssignment,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    VirtualHost,
)
from dragoman.dag.node_groups.groups import MISDIRECTED
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.clusters import Unresolved, service_cluster
from dragoman.dag.upstreams.endpoints import (
    checked_assignment,
    checked_assignments,
    checked_clusters,
    load_assignments,
    refresh_load_assignments,
)
from dragoman.store import Store


@dataclass(frozen=True, slots=True)
class ApiListener:
    """One name gRPC clients dial, and the routes its calls take (in precedence order)."""

    name: str  # "<host>:<port>": the Listener's and its RouteConfiguration's name
    host: str
    routes: tuple[Route, ...]


@dataclass(frozen=True, slots=True)
class ServiceTargets:
    """Every Service port a gRPC client can dial, with the clusters and endpoints it needs."""

    listeners: tuple[ApiListener, ...] = ()
    clusters: Mapping[str, Cluster] = field(default_factory=dict)  # aggregate children too
    load_assignments: Mapping[str, LoadAssignment] = field(default_factory=dict)


NO_SERVICE_TARGETS = ServiceTargets()


def target_name(host: str, port: int) -> str:
    return f"{host}:{port}"


def service_host(namespace: str, name: str, cluster_domain: str) -> str:
    """`<svc>.<ns>.svc.<cluster domain>`: the name gRPC clients dial a Service by."""
    return f"{name}.{namespace}.svc.{normalise(cluster_domain)}"


def service_targets(
    store: Store, options: BuildOptions, dns: DnsObservations | None = None
) -> ServiceTargets:
    """A target per TCP port of every Service whose port resolves to a cluster.

    A port that does not (an unsafe or refused ExternalName, a missing alias) has no target:
    its listener does not exist, as for a Service that does not exist.
    """
    context = build_context(store, options, dns)
    listeners: list[ApiListener] = []
    clusters: dict[str, Cluster] = {}
    for key in sorted(store.services):
        service = store.services[key]
        host = service_host(service.meta.namespace, service.meta.name, options.cluster_domain)
        for port in sorted({p.port for p in service.ports if p.protocol == "TCP"}):
            cluster = service_cluster(service, port, context)
            if isinstance(cluster, Unresolved):
                continue
            clusters[cluster.name] = cluster
            if isinstance(cluster, AggregateCluster):
                clusters.update((child.name, child) for child in cluster.children)
            forward = Forward(
                backends=(Backend(cluster=cluster.name, weight=1),),
                # For clients that may rewrite the authority (gRFC A81): the external name.
                auto_host_rewrite=isinstance(cluster, DnsCluster | AggregateCluster),
            )
            route = Route(RouteMatch("PathPrefix", "/"), forward, source=service.key)
            name = target_name(host, port)
            listeners.append(ApiListener(name=name, host=host, routes=(route,)))
    assignments = load_assignments(clusters, store, options.endpoint_networks)
    assignments.update(
        checked_assignments(clusters, dns or {}, options.external_names, options.dns_lookup_family)
    )
    return ServiceTargets(
        listeners=tuple(listeners), clusters=clusters, load_assignments=assignments
    )


def refreshed_service_targets(
    targets: ServiceTargets, store: Store, previous: Store, options: BuildOptions
) -> ServiceTargets:
    """The EDS fast path: the same targets with the endpoints of changed Services refreshed."""
    refreshed = refresh_load_assignments(
        Dag(clusters=targets.clusters, load_assignments=targets.load_assignments),
        store,
        previous,
        options.endpoint_networks,
    )
    if refreshed.load_assignments is targets.load_assignments:
        return targets
    return dataclasses.replace(targets, load_assignments=refreshed.load_assignments)


def dns_refreshed_targets(
    targets: ServiceTargets,
    dns: DnsObservations,
    policy: ExternalNamePolicy,
    changed: Container[str],
    default_family: str,
) -> ServiceTargets:
    """The same targets with the checked addresses of the `changed` external names."""
    assignments = dict(targets.load_assignments)
    for value in checked_clusters(targets.clusters):
        if value.hostname in changed:
            served = served_addresses(value.hostname, dns.get(value.hostname), policy)
            assignments[value.name] = checked_assignment(value, served, default_family)
    return dataclasses.replace(targets, load_assignments=assignments)


def route_targets(group: NodeGroup) -> tuple[ApiListener, ...]:
    """A target per exact hostname a port of the group serves routes for.

    Wildcard hostnames have none: a gRPC client dials one name. On an HTTPS port the virtual
    host of the hostname's own TLS chain is taken (the others answer 421 for it).
    """
    tables = {table.name: table for table in group.route_tables}
    found: dict[str, ApiListener] = {}
    for listener in sorted(group.listeners, key=lambda listener: listener.port):
        port = listener.port
        for table in (tables[n] for n in _route_table_names(listener) if n in tables):
            for host in _served_hosts(table):
                name = target_name(host.name, port)
                found.setdefault(name, ApiListener(name=name, host=host.name, routes=host.routes))
    return tuple(found[name] for name in sorted(found))


def group_targets(group: NodeGroup, services: ServiceTargets) -> tuple[ApiListener, ...]:
    """Everything the group's gRPC clients can dial; a route hostname wins over a Service
    name spelled the same (a route says more about where calls go)."""
    by_name = {listener.name: listener for listener in services.listeners}
    by_name.update((listener.name, listener) for listener in route_targets(group))
    return tuple(by_name[name] for name in sorted(by_name))


def _route_table_names(listener: Listener) -> tuple[str, ...]:
    """The route tables of an HTTP or HTTPS port; none for TCP, TLS and UDP ports, whose
    connections a gRPC client cannot dial by name (it sees none of them)."""
    if isinstance(listener, HttpsListener):
        return tuple(chain.route_table for chain in listener.filter_chains)
    if isinstance(listener, HttpListener):
        return (listener.route_table,)
    return ()


def _served_hosts(table: RouteTable) -> Iterable[VirtualHost]:
    for host in table.virtual_hosts:
        if host.name == ANY_HOST or host.name.startswith("*.") or not host.routes:
            continue
        if all(route.action == MISDIRECTED for route in host.routes):
            continue
        yield host
