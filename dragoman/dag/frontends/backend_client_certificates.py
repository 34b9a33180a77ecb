"""Clusters that present a Gateway's client certificate (spec.tls.backend.clientCertificateRef).

Clusters are shared by every group that routes to them, but a client certificate belongs to
a Gateway: each group whose Gateways name one gets its own variant of every cluster it
reaches over TLS, named after the Secret (`<cluster>/client-certificate/<ns>/<secret>`),
and its routes are pointed at the variants. Envoys given every Gateway present a
certificate only when all those Gateways name the same one: a backend of one Gateway never
sees another Gateway's identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dragoman.dag.frontends.listeners import GatewayVerdict
from dragoman.dag.model import (
    ALL_GATEWAYS,
    AggregateCluster,
    Backend,
    Cluster,
    DnsCluster,
    EdsCluster,
    Forward,
    HttpListener,
    HttpsListener,
    InjectedCredential,
    L4Forward,
    Listener,
    NodeGroup,
    RouteTable,
    TcpListener,
    TlsCertificate,
    UdpListener,
)


def with_client_certificates(
    groups: Mapping[str, NodeGroup],
    clusters: Mapping[str, Cluster],
    gateways: Sequence[GatewayVerdict],
) -> tuple[dict[str, NodeGroup], dict[str, Cluster]]:
    by_group = {
        f"{v.gateway.meta.namespace}/{v.gateway.meta.name}": v.client_certificate for v in gateways
    }
    every = {v.client_certificate for v in gateways}
    shared = next(iter(every)) if len(every) == 1 else None
    result_groups: dict[str, NodeGroup] = {}
    result_clusters = dict(clusters)
    for name, group in groups.items():
        certificate = shared if name == ALL_GATEWAYS else by_group.get(name)
        if certificate is None:
            result_groups[name] = group
            continue
        renamed: dict[str, str] = {}
        for cluster_name in group.clusters:
            cluster = clusters.get(cluster_name)
            if cluster is None or not _originates_tls(cluster):
                continue
            variant = _variant(cluster, certificate)
            renamed[cluster_name] = variant.name
            result_clusters[variant.name] = variant
        result_groups[name] = _renamed_group(group, renamed) if renamed else group
    return result_groups, result_clusters


def _originates_tls(cluster: Cluster) -> bool:
    """Whether the cluster reaches its backends over TLS without a certificate of its own
    (an XBackend's clientCertificateRef, a BackendTLSPolicy's client-certificate option:
    those take precedence over the Gateway's)."""
    if isinstance(cluster, AggregateCluster):
        return any(_wants_certificate(child) for child in cluster.children)
    return _wants_certificate(cluster)


def _wants_certificate(cluster: EdsCluster | DnsCluster) -> bool:
    return cluster.tls is not None and cluster.tls.client_certificate is None


def _variant_name(name: str, certificate: TlsCertificate) -> str:
    secret = certificate.secret
    return f"{name}/client-certificate/{secret.namespace}/{secret.name}"


def _variant(cluster: Cluster, certificate: TlsCertificate) -> Cluster:
    if isinstance(cluster, AggregateCluster):
        return dataclasses.replace(
            cluster,
            name=_variant_name(cluster.name, certificate),
            children=tuple(_leaf_variant(child, certificate) for child in cluster.children),
        )
    return _leaf_variant(cluster, certificate)


def _leaf_variant(
    cluster: EdsCluster | DnsCluster, certificate: TlsCertificate
) -> EdsCluster | DnsCluster:
    if cluster.tls is None or cluster.tls.client_certificate is not None:
        return cluster  # an aggregate's cleartext child, or one with its own, stays shared
    tls = dataclasses.replace(cluster.tls, client_certificate=certificate)
    return dataclasses.replace(cluster, name=_variant_name(cluster.name, certificate), tls=tls)


def _renamed_group(group: NodeGroup, renamed: Mapping[str, str]) -> NodeGroup:
    return dataclasses.replace(
        group,
        listeners=tuple(_renamed_listener(listener, renamed) for listener in group.listeners),
        route_tables=tuple(_renamed_table(table, renamed) for table in group.route_tables),
        clusters=tuple(sorted(renamed.get(name, name) for name in group.clusters)),
    )


def _renamed_backends(
    backends: tuple[Backend, ...], renamed: Mapping[str, str]
) -> tuple[Backend, ...]:
    return tuple(
        dataclasses.replace(b, cluster=renamed[b.cluster])
        if b.cluster is not None and b.cluster in renamed
        else b
        for b in backends
    )


def _renamed_listener(listener: Listener, renamed: Mapping[str, str]) -> Listener:
    def forward(value: L4Forward) -> L4Forward:
        return dataclasses.replace(value, backends=_renamed_backends(value.backends, renamed))

    if isinstance(listener, UdpListener):
        return dataclasses.replace(listener, forward=forward(listener.forward))
    if isinstance(listener, HttpListener) and listener.credentials:
        credentials = _renamed_credentials(listener.credentials, renamed)
        return dataclasses.replace(listener, credentials=credentials)
    if isinstance(listener, HttpsListener):
        tls_chains = tuple(
            dataclasses.replace(chain, credentials=_renamed_credentials(chain.credentials, renamed))
            if chain.credentials
            else chain
            for chain in listener.filter_chains
        )
        return dataclasses.replace(listener, filter_chains=tls_chains)
    if isinstance(listener, TcpListener):
        chains = tuple(
            dataclasses.replace(chain, forward=forward(chain.forward))
            for chain in listener.filter_chains
        )
        return dataclasses.replace(listener, filter_chains=chains)
    return listener


def _renamed_table(table: RouteTable, renamed: Mapping[str, str]) -> RouteTable:
    hosts = []
    for host in table.virtual_hosts:
        routes = []
        for route in host.routes:
            action = route.action
            if isinstance(action, Forward) and any(c in renamed for c in action.clusters):
                action = dataclasses.replace(
                    action,
                    backends=_renamed_backends(action.backends, renamed),
                    mirrors=tuple(
                        dataclasses.replace(m, cluster=renamed.get(m.cluster, m.cluster))
                        for m in action.mirrors
                    ),
                )
                route = dataclasses.replace(route, action=action)
            if route.credentials:
                credentials = _renamed_credentials(route.credentials, renamed)
                route = dataclasses.replace(route, credentials=credentials)
            routes.append(route)
        hosts.append(dataclasses.replace(host, routes=tuple(routes)))
    return dataclasses.replace(table, virtual_hosts=tuple(hosts))


def _renamed_credentials(
    credentials: tuple[InjectedCredential, ...], renamed: Mapping[str, str]
) -> tuple[InjectedCredential, ...]:
    """`credentials` whose OAuth2 token endpoints fetch through the renamed clusters."""
    return tuple(
        dataclasses.replace(
            c, oauth2=dataclasses.replace(c.oauth2, cluster=renamed[c.oauth2.cluster])
        )
        if c.oauth2 is not None and c.oauth2.cluster in renamed
        else c
        for c in credentials
    )
