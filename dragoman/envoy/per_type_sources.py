"""Resources for clients on per-type streams: ADS config sources pointed at per-type streams.

Serving hands each such client `PerTypeConfigSources.per_type` of its group's snapshot.

Translation emits EDS clusters and RDS connection managers whose config source is `ads {}`.
A client fetching clusters over StreamClusters (or DeltaClusters) has no ADS stream, so the
clusters and listeners (RDS and SDS) it is served name a per-type config source instead: its
own kind (SotW or delta) through the bootstrap's cluster for dragoman (`dragoman-xds`, or the
name `serve --xds-cluster-name` gives). The rewrite is pure, done
once per distinct resource and variant, and shared by every stream of that variant.
"""

from __future__ import annotations

from collections import OrderedDict

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.base_pb2 import TransportSocket
from envoy.config.core.v3.config_source_pb2 import ConfigSource
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf.message import DecodeError

from dragoman.envoy.bootstrap import XDS_CLUSTER, per_type_config_source
from dragoman.snapshots.references import hcm_configs
from dragoman.snapshots.resources import CLUSTER, LISTENER, Resource, Snapshot, TypeSnapshot

# Rewritten types kept: CDS and LDS of a few groups and both per-type variants. Each comes
# with its resources by original digest, so that the next version of the type rewrites only
# what changed; nothing else keeps rewritten resources alive.
TYPE_CACHE_ENTRIES = 8

_Key = tuple[str, str, bool]  # type URL, original version, delta
_Made = tuple[TypeSnapshot, dict[str, Resource]]  # and rewritten resources by original digest


class PerTypeConfigSources:
    """Makes the snapshots per-type clients see; each instance remembers its own rewrites."""

    def __init__(self, cluster_name: str = XDS_CLUSTER, entries: int = TYPE_CACHE_ENTRIES) -> None:
        # What per-type clients' bootstraps call their cluster for dragoman.
        self.cluster_name = cluster_name
        self._entries = entries
        self._rewritten_types: OrderedDict[_Key, _Made] = OrderedDict()

    def per_type(self, snapshot: Snapshot, *, delta: bool) -> Snapshot:
        """`snapshot` as a client on per-type streams (SotW, or delta) must see it."""
        types = dict(snapshot.types)
        for type_url in (CLUSTER, LISTENER):
            if type_url in types:
                types[type_url] = self._rewritten_type(type_url, types[type_url], delta)
        return Snapshot(types=types)

    def __len__(self) -> int:
        """How many rewritten types are remembered."""
        return len(self._rewritten_types)

    def _rewritten_type(self, type_url: str, original: TypeSnapshot, delta: bool) -> TypeSnapshot:
        made_types = self._rewritten_types
        key = (type_url, original.version, delta)
        found = made_types.get(key)
        if found is not None:
            made_types.move_to_end(key)
            return found[0]
        # Most recent first: the version this one most likely replaces.
        earlier = [
            made
            for (kind, _, variant), (_, made) in reversed(made_types.items())
            if kind == type_url and variant is delta
        ]
        by_digest: dict[str, Resource] = {}
        resources: list[Resource] = []
        for resource in original.resources.values():
            rewritten = next((m[resource.digest] for m in earlier if resource.digest in m), None)
            if rewritten is None or rewritten.name != resource.name:
                rewritten = _rewritten(resource, delta, self.cluster_name)
            by_digest[resource.digest] = rewritten
            resources.append(rewritten)
        result = TypeSnapshot.of(resources)
        made_types[key] = (result, by_digest)
        if len(made_types) > self._entries:
            made_types.popitem(last=False)
        return result


def _rewritten(resource: Resource, delta: bool, cluster_name: str) -> Resource:
    rewrite = _cluster if resource.type_url == CLUSTER else _listener
    body = rewrite(resource.body, delta, cluster_name)
    return resource if body is None else Resource.of_bytes(resource.name, resource.type_url, body)


def _cluster(body: bytes, delta: bool, cluster_name: str) -> bytes | None:
    """The cluster with per-type EDS and SDS config sources, or None if it has no ADS one."""
    try:
        cluster = Cluster.FromString(body)
    except DecodeError:
        return None
    changed = False
    if _is_ads(cluster.eds_cluster_config.eds_config):
        cluster.eds_cluster_config.eds_config.CopyFrom(
            per_type_config_source(delta=delta, cluster_name=cluster_name)
        )
        changed = True
    if cluster.HasField("transport_socket"):
        changed |= _per_type_sds(
            cluster.transport_socket, tls_pb2.UpstreamTlsContext, delta, cluster_name
        )
    return cluster.SerializeToString(deterministic=True) if changed else None


def _listener(body: bytes, delta: bool, cluster_name: str) -> bytes | None:
    """The listener with per-type RDS and SDS config sources, or None if it has no ADS one."""
    try:
        listener = Listener.FromString(body)
    except DecodeError:
        return None
    changed = False
    for config in hcm_configs(listener):
        manager = hcm.HttpConnectionManager.FromString(config.value)
        if manager.HasField("rds") and _is_ads(manager.rds.config_source):
            manager.rds.config_source.CopyFrom(
                per_type_config_source(delta=delta, cluster_name=cluster_name)
            )
            config.value = manager.SerializeToString(deterministic=True)
            changed = True
    for chain in listener.filter_chains:
        changed |= _per_type_sds(
            chain.transport_socket, tls_pb2.DownstreamTlsContext, delta, cluster_name
        )
    return listener.SerializeToString(deterministic=True) if changed else None


TlsContext = type[tls_pb2.DownstreamTlsContext] | type[tls_pb2.UpstreamTlsContext]


def _per_type_sds(
    socket: TransportSocket, context_type: TlsContext, delta: bool, cluster_name: str
) -> bool:
    """Point the TLS context's SDS configs (certificates, validation context) at per-type
    streams; True if any."""
    type_url = "type.googleapis.com/" + context_type.DESCRIPTOR.full_name
    if not socket.HasField("typed_config") or socket.typed_config.type_url != type_url:
        return False
    context = context_type.FromString(socket.typed_config.value)
    common = context.common_tls_context
    sds = [*common.tls_certificate_sds_secret_configs]
    # A validation context over SDS (clients' certificates checked), plain or combined.
    if common.HasField("validation_context_sds_secret_config"):
        sds.append(common.validation_context_sds_secret_config)
    if common.HasField("combined_validation_context"):
        sds.append(common.combined_validation_context.validation_context_sds_secret_config)
    ads = [config for config in sds if _is_ads(config.sds_config)]
    for config in ads:
        config.sds_config.CopyFrom(per_type_config_source(delta=delta, cluster_name=cluster_name))
    if ads:
        socket.typed_config.value = context.SerializeToString(deterministic=True)
    return bool(ads)


def _is_ads(source: ConfigSource) -> bool:
    return source.WhichOneof("config_source_specifier") == "ads"
