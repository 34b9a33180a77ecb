"""What one serialized xDS resource names in another.

The stream state machine needs two links to order ADS make-before-break: the
ClusterLoadAssignment an EDS Cluster reads, and the RouteConfigurations a
Listener reads. Both are parsed from the shared bytes and cached by those
bytes, so thousands of streams pay for one parse per distinct resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.listener.v3.listener_components_pb2 import Filter
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from google.protobuf.any_pb2 import Any
from google.protobuf.message import DecodeError

_HCM_TYPE_URL = "type.googleapis.com/" + hcm.HttpConnectionManager.DESCRIPTOR.full_name

# Bounded: entries are keyed by (and keep alive) resource bodies.
_CACHE_SIZE = 16384


@lru_cache(maxsize=_CACHE_SIZE)
def eds_service_name(cluster_body: bytes) -> str | None:
    """The CLA name an EDS Cluster subscribes to, or None for any other kind of cluster."""
    try:
        cluster = Cluster.FromString(cluster_body)
    except DecodeError:
        return None
    if cluster.HasField("cluster_type") or cluster.type != Cluster.EDS:
        return None
    return cluster.eds_cluster_config.service_name or cluster.name


@lru_cache(maxsize=_CACHE_SIZE)
def route_config_names(listener_body: bytes) -> frozenset[str]:
    """Names of the RouteConfigurations a Listener's HTTP connection managers fetch over RDS."""
    try:
        listener = Listener.FromString(listener_body)
    except DecodeError:
        return frozenset()
    managers: list[Any] = []
    chains = list(listener.filter_chains)
    if listener.HasField("default_filter_chain"):
        chains.append(listener.default_filter_chain)
    for chain in chains:
        managers.extend(_hcm_configs(chain.filters))
    if listener.HasField("api_listener"):
        managers.append(listener.api_listener.api_listener)
    names: set[str] = set()
    for config in managers:
        if config.type_url != _HCM_TYPE_URL:
            continue
        manager = hcm.HttpConnectionManager()
        if config.Unpack(manager) and manager.HasField("rds"):
            names.add(manager.rds.route_config_name)
    return frozenset(names)


def _hcm_configs(filters: Iterable[Filter]) -> list[Any]:
    return [f.typed_config for f in filters if f.HasField("typed_config")]
