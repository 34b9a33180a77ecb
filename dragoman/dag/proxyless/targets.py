"""What proxyless gRPC clients can dial by a Service's name, as plain values: every TCP port of
every Service by its cluster DNS name, with the clusters and endpoints it needs.

A gRPC client dialing `xds:///<host>:<port>` asks for the Listener named `<host>:<port>`.
A Service target (`<svc>.<ns>.svc.<cluster domain>:<port>`) sends every call to that Service
port's cluster (an aggregate's children with it), resolved as a route's backendRef would
be (ExternalName aliases, policy and the DNS check included): the resolution a route already
made is taken, not made again. (Route hostnames are targets too: envoy/grpc reads them from
each node group's route tables, and makes each target's API listener.)
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.external_names import normalise
from dragoman.dag.model import (
    Cluster,
    DnsCluster,
    EdsCluster,
    LoadAssignment,
    ServiceTarget,
)
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.clusters import Unresolved, service_cluster
from dragoman.dag.upstreams.endpoints import dns_cluster_assignment, load_assignment
from dragoman.objects import EndpointSlice, Service
from dragoman.store import NamespacedName


def service_host(namespace: str, name: str, cluster_domain: str) -> str:
    """`<svc>.<ns>.svc.<cluster domain>`: the name gRPC clients dial a Service by."""
    return f"{name}.{namespace}.svc.{normalise(cluster_domain)}"


def service_port_targets(
    service: Service,
    context: BuildContext,
    domain: str | None = None,
    key: NamespacedName | None = None,
) -> tuple[ServiceTarget, ...]:
    """A target per TCP port of `service` that resolves to a cluster, by port (`domain`:
    the cluster domain normalised, and `key` the Service's key in the store, when the
    caller has them: each target shares them).

    A port that does not (an unsafe or refused ExternalName, a missing alias) has no target:
    its listener does not exist, as for a Service that does not exist.
    """
    meta = service.meta
    namespace, name = meta.namespace, meta.name
    if domain is None:
        domain = normalise(context.options.cluster_domain)
    host = f"{name}.{namespace}.svc.{domain}"  # service_host's, the domain normalised once
    resolved = context.resolved_ports
    ports = [p.port for p in service.ports if p.protocol == "TCP"]
    found: list[ServiceTarget] = []
    if key is None:
        key = namespace, name
    for port in sorted(set(ports)) if len(ports) > 1 else ports:
        port_key = service.key, port
        cluster = resolved[port_key] if port_key in resolved else _resolved(service, port, context)
        if cluster is not None:
            found.append(ServiceTarget(host, port, key, cluster))
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
