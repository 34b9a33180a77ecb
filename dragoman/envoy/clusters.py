"""DAG clusters → envoy.config.cluster.v3.Cluster: EDS over ADS, or STRICT_DNS by extension."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import protocol_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_pb2

from dragoman.dag.model import H2C, HTTP1, Cluster, DnsCluster, EdsCluster
from dragoman.envoy.core import ads_config_source, pack, seconds
from dragoman.envoy.dns import dns_cluster_type
from dragoman.envoy.endpoints import single_host_assignment
from dragoman.envoy.options import TranslateOptions

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def cluster(value: Cluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    if isinstance(value, EdsCluster):
        message = eds_cluster(value, options)
    else:
        message = dns_cluster(value, options)
    protocol_options = upstream_protocol_options(value.protocol)
    if protocol_options is not None:
        message.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
            pack(protocol_options)
        )
    return message


def upstream_protocol_options(protocol: str) -> http_options_pb2.HttpProtocolOptions | None:
    """How Envoy speaks HTTP to the cluster; None for HTTP/1.1, Envoy's default."""
    if protocol == HTTP1:
        return None
    if protocol == H2C:
        # HTTP/2 with prior knowledge, over cleartext.
        return http_options_pb2.HttpProtocolOptions(
            explicit_http_config=http_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
            )
        )
    raise ValueError(f"unknown upstream protocol {protocol!r}")


def eds_cluster(value: EdsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=value.name,
        type=cluster_pb2.Cluster.EDS,
        # The CLA is named like the cluster, so no service_name is needed.
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_config_source()),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=seconds(options.connect_timeout_s),
    )


def dns_cluster(value: DnsCluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=value.name,
        cluster_type=dns_cluster_type(
            refresh_s=options.dns_refresh_s,
            respect_ttl=options.dns_respect_ttl,
            lookup_family=options.dns_lookup_family,
        ),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=seconds(options.connect_timeout_s),
        load_assignment=single_host_assignment(
            value.name, value.hostname, value.port, absolute=True
        ),
    )
