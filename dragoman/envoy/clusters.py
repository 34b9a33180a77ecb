"""DAG clusters → envoy.config.cluster.v3.Cluster: EDS over ADS, or STRICT_DNS by extension."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2

from dragoman.dag.model import Cluster, DnsCluster, EdsCluster
from dragoman.envoy.core import ads_config_source, seconds
from dragoman.envoy.dns import dns_cluster_type
from dragoman.envoy.endpoints import single_host_assignment
from dragoman.envoy.options import TranslateOptions


def cluster(value: Cluster, options: TranslateOptions) -> cluster_pb2.Cluster:
    if isinstance(value, EdsCluster):
        return eds_cluster(value, options)
    return dns_cluster(value, options)


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
