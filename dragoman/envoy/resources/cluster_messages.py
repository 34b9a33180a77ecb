"""DAG clusters → envoy.config.cluster.v3.Cluster: EDS over ADS, STRICT/LOGICAL DNS by the
`envoy.cluster.dns` extension, or an `envoy.clusters.aggregate` (in-cluster first); with
TLS and HTTP protocol options as the DAG decided."""

from __future__ import annotations

from functools import lru_cache
from typing import TypeAlias

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import protocol_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_pb2
from google.protobuf.duration_pb2 import Duration

from dragoman.dag.model import (
    H1,
    H2,
    H2C,
    HTTP1,
    L4_PROTOCOLS,
    AggregateCluster,
    Cluster,
    DnsCluster,
    EdsCluster,
    HappyEyeballs,
)
from dragoman.envoy.resources.cluster_policy_messages import (
    apply_cluster_policy,
    with_policy_protocol_options,
)
from dragoman.envoy.resources.common_messages import pack, seconds
from dragoman.envoy.resources.config_sources import config_source, config_source_for
from dragoman.envoy.resources.dns_cluster_type import cares_resolver, dns_cluster_type
from dragoman.envoy.resources.endpoint_messages import fill_single_host_assignment
from dragoman.envoy.resources.traffic_policy_messages import (
    aggregate_retry_budget,
    apply_retry_budget,
)
from dragoman.envoy.resources.upstream_tls import upstream_tls_socket
from dragoman.envoy.translate_options import ConfigSources, TranslateOptions

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
AGGREGATE_CLUSTER_EXTENSION = "envoy.clusters.aggregate"
# Envoy's connect_timeout when a Cluster sets none (documented, and the same since v2).
ENVOY_DEFAULT_CONNECT_TIMEOUT_S = 5.0

_HttpOptions: TypeAlias = http_options_pb2.HttpProtocolOptions


def _eds_config(options: TranslateOptions) -> cluster_pb2.Cluster.EdsClusterConfig:
    return _eds_config_of(options.config_sources, options.xds_cluster_name)


@lru_cache(maxsize=16)
def _eds_config_of(kind: ConfigSources, cluster_name: str) -> cluster_pb2.Cluster.EdsClusterConfig:
    """Shared by every EDS cluster: a message given to a constructor is copied into the new
    one, so this is read, never changed."""
    return cluster_pb2.Cluster.EdsClusterConfig(eds_config=config_source_for(kind, cluster_name))


def connect_timeout(options: TranslateOptions) -> Duration | None:
    """The Cluster's connect_timeout; None (left out) when it is Envoy's own default.

    Every SotW CDS update makes each Envoy parse and hash every cluster again: a field
    left out of 10,000 clusters is measurable CPU on every Envoy at every change."""
    if options.connect_timeout_s == ENVOY_DEFAULT_CONNECT_TIMEOUT_S:
        return None
    return _timeout(options.connect_timeout_s)


@lru_cache(maxsize=64)
def _timeout(value_s: float) -> Duration:
    """A shared Duration (copied by the constructors it is given to, never changed)."""
    return seconds(value_s)


@lru_cache(maxsize=256)
def _dns_type(
    refresh_s: float,
    respect_ttl: bool,
    lookup_family: str,
    resolvers: tuple[tuple[str, int], ...],
    failure_refresh_s: tuple[float, float] | None,
    jitter_s: float | None,
    logical: bool,
    min_refresh_s: float | None = None,
) -> cluster_pb2.Cluster.CustomClusterType:
    """The DNS extension's config, packed once per distinct settings (most clusters share
    the defaults); shared, so copied by the constructors it is given to, never changed."""
    return dns_cluster_type(
        refresh_s=refresh_s,
        respect_ttl=respect_ttl,
        lookup_family=lookup_family,
        resolver=cares_resolver(resolvers) if resolvers else None,
        failure_refresh_s=failure_refresh_s,
        jitter_s=jitter_s,
        logical=logical,
        min_refresh_s=min_refresh_s,
    )


def cluster(value: Cluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    if isinstance(value, AggregateCluster):
        # Protocol and TLS belong to the clusters it aggregates.
        message = aggregate_cluster(value, options)
        budget = aggregate_retry_budget(value)
        if budget is not None:
            # Routes name the aggregate: Envoy counts their retries against its breakers.
            apply_retry_budget(message, budget)
        return message
    if isinstance(value, DnsCluster) and not value.served_over_eds:
        message = dns_cluster(value, options)
    else:
        message = eds_cluster(value, options)
    if isinstance(value, DnsCluster):
        happy_eyeballs = _happy_eyeballs(value, options)
        if happy_eyeballs is not None:
            apply_happy_eyeballs(message, happy_eyeballs)
    if value.client_ip_affinity:
        # sessionAffinity ClientIP: the route hashes the client's address (hash_policy
        # source_ip) onto a ring of the endpoints, so one client keeps reaching one endpoint
        # while the set is stable (timeoutSeconds has no Envoy counterpart).
        message.lb_policy = cluster_pb2.Cluster.RING_HASH
    protocol_options = upstream_protocol_options(value.protocol, tls=value.tls is not None)
    if value.policy is not None:
        apply_cluster_policy(message, value.policy, value.protocol)
        protocol_options = with_policy_protocol_options(
            protocol_options, value.policy, value.protocol
        )
    if value.traffic is not None and value.traffic.retry_budget is not None:
        apply_retry_budget(message, value.traffic.retry_budget)
    if protocol_options is not None:
        message.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
            pack(protocol_options)
        )
    if value.tls is not None:
        message.transport_socket.CopyFrom(
            upstream_tls_socket(
                value.tls, value.protocol, options.system_ca_file, config_source(options)
            )
        )
    return message


def _happy_eyeballs(value: DnsCluster, options: TranslateOptions) -> HappyEyeballs | None:
    """The backend's own order, else the server's for a logical cluster that looks up both
    families (only its host has addresses of both)."""
    settings = value.dns
    if settings.happy_eyeballs is not None or not settings.logical:
        return settings.happy_eyeballs
    if (settings.lookup_family or options.dns_lookup_family) != "ALL":
        return None
    return options.dns_happy_eyeballs


def apply_happy_eyeballs(message: cluster_pb2.Cluster, settings: HappyEyeballs) -> None:
    """The order in which a host with several addresses tries them: the first family, and
    how many of its addresses before one of the other family."""
    config = message.upstream_connection_options.happy_eyeballs_config
    config.SetInParent()
    if settings.first_family is not None:
        config.first_address_family_version = (
            cluster_pb2.UpstreamConnectionOptions.FirstAddressFamilyVersion.Value(
                settings.first_family
            )
        )
    if settings.first_family_count is not None:
        config.first_address_family_count.value = settings.first_family_count


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
    if protocol == H1:
        # HTTP/1.1 only, over TLS (the TLS context offers ALPN http/1.1 alone).
        return _HttpOptions(
            explicit_http_config=_HttpOptions.ExplicitHttpConfig(
                http_protocol_options=protocol_pb2.Http1ProtocolOptions()
            )
        )
    if protocol in (H2C, H2):
        # HTTP/2 only: with prior knowledge over cleartext (h2c), or by ALPN h2 over TLS.
        return _HttpOptions(
            explicit_http_config=_HttpOptions.ExplicitHttpConfig(
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
            )
        )
    raise ValueError(f"unknown upstream protocol {protocol!r}")


def eds_cluster(value: EdsCluster | DnsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=value.name,
        type=cluster_pb2.Cluster.EDS,
        # The CLA is named like the cluster, so no service_name is needed.
        eds_cluster_config=_eds_config(options),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=connect_timeout(options),
    )


def dns_cluster(value: DnsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    settings = value.dns
    failure = None
    if settings.failure_base_s is not None:
        failure = (settings.failure_base_s, settings.failure_max_s or settings.failure_base_s)
    message = cluster_pb2.Cluster(
        name=value.name,
        cluster_type=_dns_type(
            settings.refresh_s or options.dns_refresh_s,
            options.dns_respect_ttl if settings.respect_ttl is None else settings.respect_ttl,
            settings.lookup_family or options.dns_lookup_family,
            # Backend names are absolute: the resolver never appends search domains.
            settings.resolvers,
            failure,
            settings.jitter_s,
            settings.logical,
            settings.min_refresh_s or options.dns_min_refresh_s,
        ),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=connect_timeout(options),
    )
    # Filled in place rather than built apart and copied in.
    fill_single_host_assignment(
        message.load_assignment, value.name, value.hostname, value.port, absolute=True
    )
    return message


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
