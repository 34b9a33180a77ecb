"""What proxyless gRPC clients can dial by a Service's name, as plain values: every TCP port of
every Service by its cluster DNS name, with the clusters and endpoints it needs.

A gRPC client dialing `xds:///<host>:<port>` asks for the Listener named `<host>:<port>`.
A Service target (`<svc>.<ns>.svc.<cluster domain>:<port>`) sends every call to that Service
port's cluster, resolved as a route's backendRef would be (ExternalName aliases, policy and
the DNS check included): the resolution a route already made is taken, not made again.
(Route hostnames are targets too: envoy/grpc reads them from each node group's route tables.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.external_names import normalise
from dragoman.dag.model import (
    AggregateCluster,
    ApiListener,
    Backend,
    Cluster,
    DnsCluster,
    EdsCluster,
    Forward,
    LoadAssignment,
    Route,
    RouteMatch,
)
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.clusters import Unresolved, service_cluster
from dragoman.dag.upstreams.endpoints import dns_cluster_assignment, load_assignment
from dragoman.objects import EndpointSlice, Service


@dataclass(frozen=True, slots=True)
class PortTarget:
    """One Service port's target: its listener, and its cluster (an aggregate's children
    after it)."""

    listener: ApiListener
    clusters: tuple[Cluster, ...]


def target_name(host: str, port: int) -> str:
    return f"{host}:{port}"


def service_host(namespace: str, name: str, cluster_domain: str) -> str:
    """`<svc>.<ns>.svc.<cluster domain>`: the name gRPC clients dial a Service by."""
    return f"{name}.{namespace}.svc.{normalise(cluster_domain)}"


def service_port_targets(service: Service, context: BuildContext) -> tuple[PortTarget, ...]:
    """A target per TCP port of `service` that resolves to a cluster, by port.

    A port that does not (an unsafe or refused ExternalName, a missing alias) has no target:
    its listener does not exist, as for a Service that does not exist.
    """
    namespace, name = service.meta.namespace, service.meta.name
    host = service_host(namespace, name, context.options.cluster_domain)
    resolved = context.resolved_ports
    found: list[PortTarget] = []
    for port in sorted({p.port for p in service.ports if p.protocol == "TCP"}):
        key = (namespace, name), port
        cluster = resolved[key] if key in resolved else _resolved(service, port, context)
        if cluster is None:
            continue
        forward = Forward(
            backends=(Backend(cluster=cluster.name, weight=1),),
            # For clients that may rewrite the authority (gRFC A81): the external name.
            auto_host_rewrite=isinstance(cluster, DnsCluster | AggregateCluster),
        )
        route = Route(RouteMatch("PathPrefix", "/"), forward, source=service.key)
        listener = ApiListener(name=target_name(host, port), host=host, routes=(route,))
        children = cluster.children if isinstance(cluster, AggregateCluster) else ()
        found.append(PortTarget(listener, (cluster, *children)))
    return tuple(found)


def target_assignment(
    cluster: Cluster,
    slices: Sequence[EndpointSlice],
    dns: DnsObservations,
    options: BuildOptions,
) -> LoadAssignment | None:
    """The load assignment of one target cluster (None: it has none, as an aggregate or a
    DNS cluster Envoy resolves itself): an EDS cluster's endpoints (`slices`: its
    Service's), or an external name's externalIPs or checked addresses."""
    if isinstance(cluster, EdsCluster):
        return load_assignment(cluster, slices, options.endpoint_networks)
    if isinstance(cluster, DnsCluster):
        return dns_cluster_assignment(
            cluster, dns, options.external_names, options.dns_lookup_family
        )
    return None


def _resolved(service: Service, port: int, context: BuildContext) -> Cluster | None:
    cluster = service_cluster(service, port, context)
    return None if isinstance(cluster, Unresolved) else cluster
