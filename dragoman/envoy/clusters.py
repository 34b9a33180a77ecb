"""DAG clusters → envoy.config.cluster.v3.Cluster: EDS over ADS, STRICT/LOGICAL DNS by the
`envoy.cluster.dns` extension, or an `envoy.clusters.aggregate` (in-cluster first); with
TLS and HTTP protocol options as the DAG decided."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import protocol_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_pb2
from google.protobuf import duration_pb2

from dragoman.dag.model import (
    H2,
    H2C,
    HTTP1,
    L4_PROTOCOLS,
    AggregateCluster,
    Cluster,
    DnsCluster,
    EdsCluster,
)
from dragoman.envoy.core import ads_config_source, pack, seconds
from dragoman.envoy.dns import cares_resolver, dns_cluster_type
from dragoman.envoy.endpoints import single_host_assignment
from dragoman.envoy.options import TranslateOptions
from dragoman.envoy.tls import upstream_tls_socket

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
AGGREGATE_CLUSTER_EXTENSION = "envoy.clusters.aggregate"
# Envoy's connect_timeout when a Cluster sets none (documented, and the same since v2).
ENVOY_DEFAULT_CONNECT_TIMEOUT_S = 5.0

_HttpOptions = http_options_pb2.HttpProtocolOptions


def cluster(value: Cluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    if isinstance(value, AggregateCluster):
        # Protocol and TLS belong to the clusters it aggregates.
        return aggregate_cluster(value, options)
    if isinstance(value, EdsCluster) or value.served_over_eds:
        # A checked external name's endpoints are the addresses dragoman resolved and
        # accepted: Envoy never resolves the name itself, so no answer goes unchecked.
        message = eds_cluster(value, options)
    else:
        message = dns_cluster(value, options)
    if value.client_ip_affinity:
        # sessionAffinity ClientIP: the route hashes the client's address (hash_policy
        # source_ip) onto a ring of the endpoints, so one client keeps reaching one endpoint
        # while the set is stable (timeoutSeconds has no Envoy counterpart).
        message.lb_policy = cluster_pb2.Cluster.RING_HASH
    protocol_options = upstream_protocol_options(value.protocol, tls=value.tls is not None)
    if protocol_options is not None:
        message.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
            pack(protocol_options)
        )
    if value.tls is not None:
        message.transport_socket.CopyFrom(
            upstream_tls_socket(value.tls, value.protocol, options.system_ca_file)
        )
    return message


def upstream_protocol_options(protocol: str, *, tls: bool = False) -> _HttpOptions | None:
    """How Envoy speaks HTTP to the cluster; None for HTTP/1.1 over cleartext, Envoy's default.

    Over TLS, HTTP1 means "what the upstream picks by ALPN": h2 if it offers it, else
    HTTP/1.1 (auto_config)."""
    if protocol == HTTP1:
        if not tls:
            return None
        return _HttpOptions(
            auto_config=_HttpOptions.AutoHttpConfig(
                http_protocol_options=protocol_pb2.Http1ProtocolOptions(),
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions(),
            )
        )
    if protocol in L4_PROTOCOLS:
        return None  # whole connections or datagrams: Envoy speaks no HTTP to the cluster
    if protocol in (H2C, H2):
        # HTTP/2 only: with prior knowledge over cleartext (h2c), or by ALPN h2 over TLS.
        return _HttpOptions(
            explicit_http_config=_HttpOptions.ExplicitHttpConfig(
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
            )
        )
    raise ValueError(f"unknown upstream protocol {protocol!r}")


def connect_timeout(options: TranslateOptions) -> duration_pb2.Duration | None:
    """The Cluster's connect_timeout; None (left out) when it is Envoy's own default.

    Every SotW CDS update makes each Envoy parse and hash every cluster again: a field
    left out of 10,000 clusters is measurable CPU on every Envoy at every change."""
    if options.connect_timeout_s == ENVOY_DEFAULT_CONNECT_TIMEOUT_S:
        return None
    return seconds(options.connect_timeout_s)


def eds_cluster(value: EdsCluster | DnsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=value.name,
        type=cluster_pb2.Cluster.EDS,
        # The CLA is named like the cluster, so no service_name is needed.
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_config_source()),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=connect_timeout(options),
    )


def dns_cluster(value: DnsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    settings = value.dns
    failure = None
    if settings.failure_base_s is not None:
        failure = (settings.failure_base_s, settings.failure_max_s or settings.failure_base_s)
    return cluster_pb2.Cluster(
        name=value.name,
        cluster_type=dns_cluster_type(
            refresh_s=settings.refresh_s or options.dns_refresh_s,
            respect_ttl=(
                options.dns_respect_ttl if settings.respect_ttl is None else settings.respect_ttl
            ),
            lookup_family=settings.lookup_family or options.dns_lookup_family,
            # Backend names are absolute: the resolver never appends search domains.
            resolver=cares_resolver(settings.resolvers) if settings.resolvers else None,
            failure_refresh_s=failure,
            jitter_s=settings.jitter_s,
            logical=settings.logical,
        ),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=connect_timeout(options),
        load_assignment=single_host_assignment(
            value.name, value.hostname, value.port, absolute=True
        ),
    )


def aggregate_cluster(value: AggregateCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    """Envoy tries the clusters in order: the next takes traffic only when those before it
    have no healthy host (an EDS cluster whose endpoints are all gone)."""
    config = aggregate_pb2.ClusterConfig(clusters=[child.name for child in value.children])
    return cluster_pb2.Cluster(
        name=value.name,
        cluster_type=cluster_pb2.Cluster.CustomClusterType(
            name=AGGREGATE_CLUSTER_EXTENSION, typed_config=pack(config)
        ),
        lb_policy=cluster_pb2.Cluster.CLUSTER_PROVIDED,
        connect_timeout=connect_timeout(options),
    )
