"""Where Envoy fetches a resource another one names (a cluster's endpoints, a listener's routes,
a TLS context's certificates): over the ADS stream, or a stream of its own type (SotW or
delta) through the bootstrap's cluster for dragoman.

Which one is a parameter of translation (`TranslateOptions.config_sources`): a client on
per-type streams is served resources translated with its own config source.
"""

from __future__ import annotations

from functools import lru_cache

from envoy.config.core.v3 import config_source_pb2, grpc_service_pb2

from dragoman.envoy.translate_options import ConfigSources, TranslateOptions


def ads_config_source() -> config_source_pb2.ConfigSource:
    """Fetch the resource over the same ADS stream (xDS v3)."""
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )


def xds_api_config_source(*, delta: bool, cluster_name: str) -> config_source_pb2.ApiConfigSource:
    """Streams to dragoman through the bootstrap's xDS cluster, SotW or delta."""
    return config_source_pb2.ApiConfigSource(
        api_type=(
            config_source_pb2.ApiConfigSource.DELTA_GRPC
            if delta
            else config_source_pb2.ApiConfigSource.GRPC
        ),
        transport_api_version=config_source_pb2.V3,
        grpc_services=[
            grpc_service_pb2.GrpcService(
                envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=cluster_name)
            )
        ],
        set_node_on_first_message_only=True,
    )


def per_type_config_source(*, delta: bool, cluster_name: str) -> config_source_pb2.ConfigSource:
    """A config source with its own stream for the resource's type (no ADS), through the
    bootstrap's cluster for dragoman named `cluster_name`."""
    return config_source_pb2.ConfigSource(
        api_config_source=xds_api_config_source(delta=delta, cluster_name=cluster_name),
        resource_api_version=config_source_pb2.V3,
    )


def config_source(options: TranslateOptions) -> config_source_pb2.ConfigSource:
    """The config source of every resource translated with `options` (shared: a message given
    to a constructor or CopyFrom is copied, so it is read, never changed)."""
    return config_source_for(options.config_sources, options.xds_cluster_name)


# By the two fields alone: hashing the whole options for every cluster costs measurably.
@lru_cache(maxsize=16)
def config_source_for(kind: ConfigSources, cluster_name: str) -> config_source_pb2.ConfigSource:
    if kind == "ads":
        return ads_config_source()
    return per_type_config_source(delta=kind == "per-type-delta", cluster_name=cluster_name)
