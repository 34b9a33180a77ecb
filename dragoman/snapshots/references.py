"""What one serialized xDS resource names in another.

The stream state machine needs two links to order ADS make-before-break: the
ClusterLoadAssignment an EDS Cluster reads, and the RouteConfigurations a
Listener reads. Both are parsed from the shared bytes and remembered by the
resource's digest (in a `ResourceReferences` the streams of one cache share), so
thousands of streams pay for one parse per distinct resource, and the memo holds only the
small answers, never the bodies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from google.protobuf.any_pb2 import Any
from google.protobuf.message import DecodeError

from dragoman.snapshots.resources import Resource

_HCM_TYPE_URL = "type.googleapis.com/" + hcm.HttpConnectionManager.DESCRIPTOR.full_name

# Answers remembered per digest: a digest and a few names each, so a few MiB at most.
_MEMO_ENTRIES = 16384

T = TypeVar("T")


class _DigestMemo(Generic[T]):
    """`compute(body)` remembered by the resource's digest, least recently used dropped first."""

    def __init__(self, compute: Callable[[bytes], T], entries: int) -> None:
        self._compute = compute
        self._entries = entries
        self._answers: OrderedDict[str, T] = OrderedDict()

    def __call__(self, resource: Resource) -> T:
        answers = self._answers
        if resource.digest in answers:
            answers.move_to_end(resource.digest)
            return answers[resource.digest]
        answer = answers[resource.digest] = self._compute(resource.body)
        if len(answers) > self._entries:
            answers.popitem(last=False)
        return answer

    def __len__(self) -> int:
        return len(self._answers)


def _eds_service_name(cluster_body: bytes) -> str | None:
    try:
        cluster = Cluster.FromString(cluster_body)
    except DecodeError:
        return None
    if cluster.HasField("cluster_type") or cluster.type != Cluster.EDS:
        return None
    return cluster.eds_cluster_config.service_name or cluster.name


def _route_config_names(listener_body: bytes) -> frozenset[str]:
    try:
        listener = Listener.FromString(listener_body)
    except DecodeError:
        return frozenset()
    names: set[str] = set()
    for config in hcm_configs(listener):
        manager = hcm.HttpConnectionManager()
        if config.Unpack(manager) and manager.HasField("rds"):
            names.add(manager.rds.route_config_name)
    return frozenset(names)


class ResourceReferences:
    """The two links, each answer remembered by the resource's digest in this object."""

    def __init__(self, entries: int = _MEMO_ENTRIES) -> None:
        self._eds_service_name = _DigestMemo(_eds_service_name, entries)
        self._route_config_names = _DigestMemo(_route_config_names, entries)

    def eds_service_name(self, cluster: Resource) -> str | None:
        """The CLA name an EDS Cluster subscribes to, or None for any other kind of cluster."""
        return self._eds_service_name(cluster)

    def route_config_names(self, listener: Resource) -> frozenset[str]:
        """Names of the RouteConfigurations a Listener's HTTP connection managers fetch over
        RDS."""
        return self._route_config_names(listener)

    def __len__(self) -> int:
        return len(self._eds_service_name) + len(self._route_config_names)


def hcm_configs(listener: Listener) -> list[Any]:
    """The listener's HttpConnectionManager configs, in its filter chains (the default one
    last) and its API listener: the listener's own messages, so changing one changes it."""
    configs: list[Any] = []
    chains = list(listener.filter_chains)
    if listener.HasField("default_filter_chain"):
        chains.append(listener.default_filter_chain)
    for chain in chains:
        configs.extend(f.typed_config for f in chain.filters if f.HasField("typed_config"))
    if listener.HasField("api_listener"):
        configs.append(listener.api_listener.api_listener)
    return [config for config in configs if config.type_url == _HCM_TYPE_URL]
